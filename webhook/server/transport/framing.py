"""Where an HTTP/1.1 request ends in the bytes received so far, without decoding it.

The worker's event loop buffers a whole request before a thread sees it (see ``worker``), so
it must know when the request is complete. gunicorn's own parser does the decoding and all
validation; this module only finds the end: the blank line after the head, and for a
chunked body the end of the last chunk and its trailer section (RFC 9112 sections 2.1 and
7.1). Framing it cannot follow (a chunk size that is not hexadecimal, a size line or trailer
over the limit) ends the request at once: gunicorn then reads the same bytes and answers
400 with its own reason.
"""

from __future__ import annotations

from dataclasses import dataclass

HEAD_END = b"\r\n\r\n"
CRLF = b"\r\n"
_HEX = frozenset(b"0123456789abcdefABCDEF")


def head_length(data: bytes | bytearray, searched: int = 0) -> int:
    """The length of the request head (through its blank line) in ``data``; 0 if incomplete.

    ``searched`` is how many bytes an earlier call already looked at: the scan resumes three
    bytes before it, the most a terminator split across two reads can have started.
    """
    end = data.find(HEAD_END, max(0, searched - 3))
    return 0 if end < 0 else end + len(HEAD_END)


@dataclass
class ChunkedEnd:
    """Follows a chunked body as it arrives: ``scan`` says when it is complete.

    State is kept between calls, so a body received in many reads is scanned once. ``limit``
    bounds a chunk-size line and the trailer section, as gunicorn's ``ChunkedReader`` does.
    """

    limit: int
    offset: int = 0  # where the next chunk-size line starts
    in_trailers: bool = False

    def scan(self, body: bytes | bytearray) -> bool:
        """True when ``body`` (the bytes after the head) holds the whole chunked body, or
        framing that gunicorn will refuse; False while more bytes are needed."""
        while True:
            if self.in_trailers:
                return self._trailers_end(body)
            line_end = body.find(CRLF, self.offset)
            if line_end < 0 or line_end - self.offset > self.limit:
                return len(body) - self.offset > self.limit
            size_field = bytes(body[self.offset : line_end]).split(b";", 1)[0].rstrip(b" \t")
            if not size_field or not _HEX.issuperset(size_field):
                return True
            size = int(size_field, 16)
            if size == 0:
                self.offset, self.in_trailers = line_end + len(CRLF), True
                continue
            data_end = line_end + len(CRLF) + size + len(CRLF)
            if len(body) < data_end:
                return False
            self.offset = data_end

    def _trailers_end(self, body: bytes | bytearray) -> bool:
        # After the last chunk: an empty line, or header lines ended by an empty line.
        if body[self.offset : self.offset + 2] == CRLF:
            return True
        if len(body) - self.offset < 2:
            return False
        return body.find(HEAD_END, self.offset) >= 0 or len(body) - self.offset > self.limit
