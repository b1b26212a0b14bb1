"""Bounded renderings of user input for messages, warnings and log lines."""

WARNING_LIMIT = 120  # characters of one admission warning; kubectl prints each on one line
# Characters of the `lwgpu.io/rewritten-from` audit trail, written by the webhook's rewrite and
# by the compiled MutatingAdmissionPolicy alike.
AUDIT_LIMIT = 1024


def shorten(value: object, limit: int = 40) -> str:
    """Render a user-supplied value for a message without echoing unbounded input.

    Strings are shown as written; anything else as its `repr`. Longer text is cut to
    `limit` characters, the last one an ellipsis.
    """
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
