"""The loaded policy compiled into Kubernetes admission policy objects, checked in-apiserver.

`final_state.final_state_check` turns a `PolicySet` into the ValidatingAdmissionPolicy
(+ binding) that refuses what the webhook would have rewritten or refused when an object
reaches the apiserver's validation unrewritten; `scope` is which requests it decides (the
webhook's own scope), `checks` what it refuses, `values` the governing policy's values and
`cel` the CEL text they are written with.

Imports: `webhook.policy`, `webhook.api` and the standard library. No I/O, no module state.
"""

from .cel import Unexpressible
from .final_state import final_state_check

__all__ = ["Unexpressible", "final_state_check"]
