"""Where a request ends (webhook/server/transport/framing.py), fed the way a socket delivers bytes.

The rules are RFC 9112's: the head ends at the first empty line (section 2.1); a chunked
body is size lines, data and CRLFs, then a last chunk of size 0 and a trailer section ended
by an empty line (section 7.1). Framing gunicorn's ChunkedReader would refuse ends the
request at once, so the thread's parse answers 400 instead of the loop waiting for more.
"""

from __future__ import annotations

import pytest

from webhook.server.transport.framing import ChunkedEnd, head_length

HEAD = b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("cut", range(1, len(HEAD)))
def test_the_head_end_is_found_whichever_read_splits_it(cut):
    first = head_length(HEAD[:cut])
    assert first == (len(HEAD) if cut == len(HEAD) else 0)
    assert head_length(HEAD + b"{body", searched=cut) == len(HEAD)


LIMIT = 100
# body as sent, complete?  (False: the server must wait for more)
CHUNKED = [
    (b"", False),
    (b"4\r\nabcd\r\n", False),
    (b"4\r\nabcd\r\n0\r\n", False),
    (b"4\r\nabcd\r\n0\r\n\r\n", True),
    (b"4;name=value\r\nabcd\r\n0\r\n\r\n", True),
    (b"4\r\nabcd\r\n0\r\nX-Checksum: 1\r\n", False),
    (b"4\r\nabcd\r\n0\r\nX-Checksum: 1\r\n\r\n", True),
    (b"A\r\n0123456789\r\n0\r\n\r\n", True),
    (b"zz\r\n", True),  # not hexadecimal: gunicorn refuses it
    (b"4 ; x\r\nab", False),  # whitespace before an extension is allowed (RFC 9112 7.1.1)
    (b"4;" + b"x" * LIMIT + b"\r\nabcd", True),  # size line over the limit
    (b"4" + b"0" * LIMIT, True),  # no end of the size line in sight
    (b"4\r\nabcd\r\n0\r\nX: " + b"x" * LIMIT, True),  # trailers over the limit
]


@pytest.mark.parametrize("body,complete", CHUNKED)
def test_a_chunked_body_ends_where_rfc_9112_says(body, complete):
    assert ChunkedEnd(LIMIT).scan(body) is complete


WELL_FORMED = [c for c in CHUNKED[:8] if c[0]]


@pytest.mark.parametrize("body,complete", WELL_FORMED)
def test_byte_by_byte_the_end_is_seen_with_the_last_byte_and_not_before(body, complete):
    end = ChunkedEnd(LIMIT)  # one scanner for all reads, as a connection keeps it
    seen = [end.scan(body[:n]) for n in range(1, len(body) + 1)]
    assert seen == [False] * (len(body) - 1) + [complete]
