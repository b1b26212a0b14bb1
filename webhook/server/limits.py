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

# The apiserver's webhook client keeps an idle connection for 90 s: client-go's transport
# (k8s.io/client-go transport/cache.go) takes IdleConnTimeout from http.DefaultTransport
# (k8s.io/apimachinery pkg/util/net/http.go, SetOldTransportDefaults). If the server closed
# an idle connection first, the apiserver could send a review on it as the server closes it:
# Go's Transport retries nothing it has begun to write on a reused connection unless the
# request is idempotent (net/http transport.go, shouldRetryRequest), and a webhook call is a
# POST, so the call fails (`write: broken pipe`) and lwgpu-mutate fails open. So the server
# waits longer and the client always closes first: the race of RFC 9112 section 9.5, and
# the standard fix (AWS Application Load Balancer, "Connection idle timeout": configure the
# application's idle timeout larger than the load balancer's, its client).
KEEPALIVE_SECONDS = 120


@dataclass(frozen=True)
class Limits:
    """How long each phase of reading a request may take, in seconds, and the body cap.

    The apiserver gives a call ``timeoutSeconds`` in all (deploy/ sets 5), so no phase of
    a real review comes near its deadline: the apiserver sends a review in milliseconds.
    Each phase is bounded on its own so that a client stalling at any of them is freed
    within seconds. ``write`` bounds each send of the response to a client that does not read.

    ``idle`` is how long a connection waits for a request while no byte of one has come:
    between requests, and also between its TLS handshake and its first request, because Go's
    Transport keeps in its pool a connection it dialed for a call that another connection
    then served, unused, until it needs one (net/http transport.go, ``dialConnFor``: a
    connection not delivered goes to ``putOrCloseIdleConn``, marked reused). ``head`` runs
    from the first byte. A silent connection costs what a kept-alive one costs, a file
    descriptor and no thread, and any client can keep one alive that long with one request.
    """

    handshake: float = 3.0
    head: float = 3.0
    body: float = 5.0
    write: float = 5.0
    max_body: int = MAX_BODY_BYTES
    idle: float = KEEPALIVE_SECONDS
