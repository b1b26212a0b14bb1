"""A test double of the kube-apiserver's discovery, for `kubectl apply --dry-run=client`.

kubectl maps each object's apiVersion and kind to a REST resource through the server's
discovery (`/api`, `/apis`, `/api/v1`, `/apis/GROUP/VERSION`, legacy format) and then GETs
the live object to compute its apply patch; a client dry run sends nothing else. This double
answers discovery for the kinds it is given and 404 `NotFound` for every object, so kubectl
prints "created (dry run)" for each object it accepts. It is not an API server: it stores
nothing and validates nothing (kubectl's own decoding and apply logic are what is tested).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _resources(kinds: set[tuple[str, str]]) -> dict[str, list[dict]]:
    """APIResourceList entries per discovery path for each (apiVersion, kind)."""
    per_path: dict[str, list[dict]] = {}
    for api_version, kind in sorted(kinds):
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        per_path.setdefault(path, []).append(
            {
                "name": kind.lower() + "s",
                "singularName": kind.lower(),
                "namespaced": True,
                "kind": kind,
                "verbs": ["create", "get", "list", "patch", "update", "delete"],
            }
        )
    return per_path


def _answers(kinds: set[tuple[str, str]]) -> dict[str, dict]:
    """The JSON body of every discovery path the double serves."""
    per_path = _resources(kinds)
    groups: dict[str, list[str]] = {}
    for path in per_path:
        if path.startswith("/apis/"):
            group, version = path.removeprefix("/apis/").split("/")
            groups.setdefault(group, []).append(version)
    answers: dict[str, dict] = {
        "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []},
        "/apis": {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": group,
                    "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                    "preferredVersion": {
                        "groupVersion": f"{group}/{versions[0]}",
                        "version": versions[0],
                    },
                }
                for group, versions in groups.items()
            ],
        },
    }
    for path, resources in per_path.items():
        group_version = path.removeprefix("/api/").removeprefix("/apis/")
        answers[path] = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }
    answers.setdefault(
        "/api/v1", {"kind": "APIResourceList", "groupVersion": "v1", "resources": []}
    )
    return answers


@contextmanager
def discovery_server(kinds: set[tuple[str, str]]) -> Iterator[str]:
    """Serve discovery for `kinds` ((apiVersion, kind) pairs) on loopback; yield its URL."""
    answers = _answers(kinds)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            body = answers.get(path)
            status = 200
            if body is None:
                status = 404
                body = {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                    "message": f"{path} not found",
                }
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            """Quiet: the test reads kubectl's output, not the double's."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
