"""HTTPS requests to a container that has no network but its own loopback.

The containers run with `--network none` (port 8443 of this machine may be taken, and the
image needs no network), so `ask` runs this module under `nsenter --net` in the container's
network namespace: there 127.0.0.1:8443 is the server. The client is the server tests' one
(`tools/loopback/https_client.py`): it trusts only the generated CA and sends the Service's
name as SNI, as the apiserver does. Run as a module it reads a JSON list of requests and
prints the JSON list of answers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tools.loopback.https_client import Connection, client_context
from tools.paths import REPO

# A request: {"method", "path", "body"?}; an answer: {"status": int, "body": str}.
Request = dict[str, str]
Answer = dict[str, Any]
PORT = 8443
# Time for the server in the container to start: two workers import Flask and the policy.
START_TIMEOUT = 60.0


def ask(pid: int, ca: Path, requests: list[Request], requests_file: Path) -> list[Answer]:
    """Send ``requests`` ({method, path, body?}) to 127.0.0.1:8443 in the network namespace of
    process ``pid``, once the server answers; each answer as {status, body}."""
    requests_file.write_text(json.dumps(requests))
    command = [
        *("nsenter", f"--net=/proc/{pid}/ns/net"),
        *(sys.executable, "-m", "tools.image.probe", str(pid), str(ca), str(requests_file)),
    ]
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=START_TIMEOUT + 30
    )
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()[-1:]
        raise RuntimeError(f"probe failed ({done.returncode}): {' '.join(said)}")
    answers: list[Answer] = json.loads(done.stdout)
    return answers


def _connect(pid: int, ca: Path) -> Connection:
    """A connection on which the server has answered /healthz (retried while it starts and
    its process ``pid`` lives)."""
    context = client_context(ca)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        connection = Connection(PORT, context)
        try:
            connection.call("GET", "/healthz")
            return connection
        except OSError:
            connection.close()
            if not Path(f"/proc/{pid}").exists():
                raise RuntimeError(f"the container's process {pid} has exited") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main(pid: str, ca: str, requests_file: str) -> None:
    """Print the answers to the requests in ``requests_file`` as a JSON list."""
    connection = _connect(int(pid), Path(ca))
    answers = []
    for request in json.loads(Path(requests_file).read_text()):
        body = request.get("body")
        headers = {"Content-Type": "application/json"} if body is not None else {}
        status, _, data = connection.call(
            request["method"], request["path"], body.encode() if body else None, headers
        )
        answers.append({"status": status, "body": data.decode()})
    connection.close()
    print(json.dumps(answers))


if __name__ == "__main__":
    main(*sys.argv[1:])
