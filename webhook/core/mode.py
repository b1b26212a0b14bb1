"""What the warnings say under a policy in each mode (`Policy.mode`).

In enforce mode a rewritten object gets one warning saying what was rewritten; a refused one
gets the refusal as the answer's message. In audit mode the object is admitted as it came, so
the warnings say what enforce mode would have done: `lwgpu (audit): would rewrite ...` and
`lwgpu (audit): would refuse: ...`. A refusal is the only place its fix is written, so it is
not cut to one warning but wrapped over a few, each within the 120 characters kubectl prints
on a line.
"""

from __future__ import annotations

import textwrap

from webhook.api.text import WARNING_LIMIT, shorten
from webhook.policy import Policy

AUDIT = "lwgpu (audit): "
# Warnings of one refusal at most. A refusal names a few fields and values, each shortened
# (`shorten`), so it takes two or three; the apiserver cuts every warning of a response to 256
# characters once together they pass 4096 (k8s.io/apiserver/pkg/endpoints/filters/warning.go).
REFUSAL_WARNINGS = 8
_REFUSAL = textwrap.TextWrapper(
    width=WARNING_LIMIT,
    initial_indent=f"{AUDIT}would refuse: ",
    subsequent_indent=AUDIT,
    max_lines=REFUSAL_WARNINGS,
    placeholder=" …",
    break_on_hyphens=False,
)


def rewrite_warning(policy: Policy, change: str, would: str) -> str:
    """The warning of a rewrite: what changed (`change`), or in audit mode what enforce mode
    would do (`would`: `rewrite ...`, `keep ...`), in fewer words, as `would` leaves less room."""
    if policy.mode == "audit":
        return shorten(f"{AUDIT}would {would}", WARNING_LIMIT)
    return shorten(f"lwgpu: {change}", WARNING_LIMIT)


def refusal_warnings(reason: str) -> tuple[str, ...]:
    """Audit mode's warnings for the refusal `reason`: what enforce mode would answer."""
    return tuple(_REFUSAL.wrap(reason))
