"""The access line stays one valid JSON object below PIPE_BUF, whatever a client sends.

pipe(7): a write of at most PIPE_BUF bytes to a pipe is atomic, so writers sharing the
pipe (threads and gunicorn workers on the container's stdout) never interleave. Here four
processes write worst-case lines into one pipe at once and every line read back parses.
"""

from __future__ import annotations

import os
import tempfile

import orjson

from webhook.admission import request_of
from webhook.server.app import access_log

# Six MiB per field, in the character JSON escapes to six bytes.
HOSTILE = "\x01" * (6 << 20)


def written(fields: dict) -> bytes:
    """What ``access_log.write`` writes for ``fields`` (to a file: a pipe could fill up)."""
    with tempfile.TemporaryFile() as out:
        access_log.write(fields, fd=out.fileno())
        out.seek(0)
        return out.read()


def hostile_line() -> bytes:
    request = {
        "uid": HOSTILE,
        "namespace": HOSTILE,
        "name": HOSTILE,
        "kind": {"kind": HOSTILE},
        "operation": HOSTILE,
    }
    return written(access_log.line("mutate", 200, 0.001, request, "mutated", HOSTILE))


def test_every_field_is_bounded_below_pipe_buf():
    line = hostile_line()
    assert len(line) <= access_log.PIPE_BUF and line.endswith(b"\n")
    fields = orjson.loads(line)
    assert fields["uid"] == "\x01" * 63 + "…" and len(fields["name"]) == 253


def test_a_failed_request_line_is_bounded_too():
    body = {"request": {"uid": HOSTILE, "namespace": HOSTILE, "kind": {"kind": HOSTILE}}}
    line = written(access_log.line("validate", 400, 0.001, request_of(body), "error", None))
    assert len(line) <= access_log.PIPE_BUF and orjson.loads(line)["status"] == 400


def test_lines_from_concurrent_writers_on_one_pipe_stay_whole():
    fields = orjson.loads(hostile_line())
    read, write = os.pipe()
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:  # child: write 200 lines and leave without running pytest's teardown
            os.close(read)
            for _ in range(200):
                access_log.write(fields, fd=write)
            os._exit(0)
        children.append(pid)
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        lines = reader.read().splitlines()
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    assert len(lines) == 800
    assert all(orjson.loads(line)["uid"] == fields["uid"] for line in lines)
