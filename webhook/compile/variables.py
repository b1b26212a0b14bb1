"""Every variable the compiled policies may read, in the order the apiserver defines them:
each variable reads only those before it (`apiserver/pkg/admission/plugin/cel/
composition.go`, `CompileAndStoreVariables`). The ValidatingAdmissionPolicy and the
MutatingAdmissionPolicy each keep the ones their expressions read (`cel.used`).
"""

from __future__ import annotations

from webhook.policy import PolicySet

from . import asks, checks, patch, placement, scope, values
from .cel import Named


def every_variable(policies: PolicySet) -> list[Named]:
    """The object's parts, the governing policy's values, the asks, the class, the patch."""
    return [
        *scope.variables(policies),
        scope.template_pointer(),
        *values.policy_variables(policies),
        *checks.check_variables(),
        *checks.scope_variables(),
        *asks.ask_variables(),
        *placement.placement_variables(values.ignores_unfitting(policies)),
        *patch.patch_variables(policies),
    ]
