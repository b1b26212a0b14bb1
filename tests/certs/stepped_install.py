"""`python -m certs install`, stopping after each write it sends: the child process of
tests/certs/interrupted.py, run as `python -m tests.certs.stepped_install ARGS` (the ARGS of
`python -m certs`).

After each write's answer is back (POST, PUT, PATCH: committed by the apiserver, or refused),
it prints one line `@wrote METHOD PATH STATUS` (a create's PATH ends in the new object's name,
as the other writes' do) and reads a line from stdin before going on;
the test checks the cluster's state there and then lets it go on or SIGKILLs it. Only this
child is changed: the product has no test branch, and what the command does between two
writes (reads, computing) leaves the cluster as the last write did.
"""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

from kubernetes.client import rest

from webhook.cli.certs import main

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def stop_after_writes() -> None:
    """Make every Kubernetes client of this process stop after each write, as above."""
    send = rest.RESTClientObject.request

    def request(self, method, url, *args, **kwargs):
        path = urlsplit(url).path
        body = kwargs.get("body")
        if method == "POST" and isinstance(body, dict):
            path += "/" + body["metadata"]["name"]
        status = "error"
        try:
            answer = send(self, method, url, *args, **kwargs)
            status = str(answer.status)
            return answer
        except rest.ApiException as exc:
            status = str(exc.status)
            raise
        finally:
            if method in WRITES:
                print(f"@wrote {method} {path} {status}", flush=True)
                sys.stdin.readline()

    rest.RESTClientObject.request = request


if __name__ == "__main__":
    stop_after_writes()
    sys.exit(main(sys.argv[1:]))
