"""What one client may take from the server: time for each read, bytes of body, idle time.

Free of gunicorn and Flask imports: ``serve``'s command line reads the defaults before the
server's imports are paid for.
"""

from __future__ import annotations

from dataclasses import dataclass

# The apiserver accepts request bodies up to 3 MiB (apiserver MaxRequestBodyBytes), so one
# object is at most 3 MiB of JSON. An AdmissionReview for an UPDATE carries two of them
# (object and oldObject), plus userInfo and options: 2 x 3 MiB + 1 MiB of headroom. A
# larger body cannot come from the apiserver, and the cap bounds a worker's memory.
MAX_BODY_BYTES = 7 * 1024 * 1024

# What bounds a review's memory is how many Python objects its JSON becomes, not its bytes:
# 7 MiB of `{},` is 2.4 million dicts (~440 MiB in a worker, several seconds to review).
# The densest valid object the apiserver accepts (3 MiB of `{"name":"A"}` env entries, one
# object per 13 bytes) has ~240k, an UPDATE twice that; beyond this, the body is refused
# before it is parsed. Braces inside strings count too, which only errs on the safe side.
MAX_JSON_CONTAINERS = 1 << 19

# The apiserver's webhook client (Go net/http, client-go transport defaults) keeps idle
# connections for 90 s. If the server closed first, the apiserver could send a review on
# a connection the server is closing and the call would fail; so the server waits longer.
KEEPALIVE_SECONDS = 120


@dataclass(frozen=True)
class Limits:
    """How long each phase of reading a request may take, in seconds, and the body cap.

    The apiserver gives a call ``timeoutSeconds`` in all (deploy/ sets 5), so no phase of
    a real review comes near its deadline: the apiserver sends a review in milliseconds.
    Each phase is bounded on its own so that a client stalling at any of them is freed
    within seconds. ``write`` bounds each send of the response to a client that does not read.
    """

    handshake: float = 3.0
    head: float = 3.0
    body: float = 5.0
    write: float = 5.0
    max_body: int = MAX_BODY_BYTES
