"""The loaded policy compiled into Kubernetes admission policy objects, checked in-apiserver.

`final_state.final_state_check` turns a `PolicySet` into the ValidatingAdmissionPolicy
(+ binding) that refuses what the webhook would have rewritten or refused when an object
reaches the apiserver's validation unrewritten; `rewrite.rewrite_policy` into the
MutatingAdmissionPolicy (+ binding) that rewrites in the apiserver what the webhook would.
`scope` is which requests both decide (the webhook's own scope), `checks` what the check
refuses, `asks`, `placement` and `patch` the webhook's reading, choice and rewrite,
`values` the governing policy's values, `variables` all of it in order and `cel` the CEL
text they are written with.

Imports: `webhook.policy`, `webhook.api` and the standard library. No I/O, no module state.
"""

from .cel import Unexpressible
from .final_state import final_state_check
from .rewrite import rewrite_policy

__all__ = ["Unexpressible", "final_state_check", "rewrite_policy"]
