"""A test double of the Kubernetes API server that speaks the real REST wire protocol.

No kube-apiserver can run on the test machines, so tests point the real `kubernetes` client
(or anything else that talks HTTP) at this loopback server instead. It serves the exact REST
paths, `kind: Status` error bodies, a global monotonically increasing resourceVersion,
optimistic concurrency, the three PATCH content types and chunked watch streams for:
core/v1 secrets and configmaps (namespaced), nodes (cluster-scoped), and
admissionregistration.k8s.io/v1 mutating/validating webhook configurations (cluster-scoped).
Tests can inject failures (`inject`), simulate an outage (`set_down`) and expire watch history
(`compact`), and read every request back from `requests`. This module is the HTTP side; what
is stored and how it changes is in tests/fakes/kubeapi_store.py.
"""

import copy
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, urlsplit

import kubernetes.client

from tests.fakes.kubeapi_store import (
    RESOURCES,
    ApiError,
    Store,
    decode,
    not_found,
    qualified,
    written,
)

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+/[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?/?$"
)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the double received it."""

    method: str
    path: str
    query: dict
    content_type: str | None
    body: bytes | None


class _Handler(BaseHTTPRequestHandler):
    """Routes each HTTP request to the owning `KubeAPIDouble`."""

    protocol_version = "HTTP/1.1"  # keep-alive and chunked watches, like the real apiserver
    # Headers and body go out as two writes; with Nagle on, the second waits for the client's
    # delayed ACK of the first (~40 ms a request on Linux loopback).
    disable_nagle_algorithm = True

    def log_message(self, *args):
        """Stay quiet: test output is for assertions."""

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        self.server.double._serve(self, body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def send_json(self, code: int, payload: dict):
        """Answer one JSON document with a Content-Length (keeps the connection reusable)."""
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_chunk(self, payload: dict | None):
        """Write one watch event as a chunk; None ends the chunked stream."""
        data = b"" if payload is None else json.dumps(payload).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class KubeAPIDouble:
    """The API server double; a context manager that serves on 127.0.0.1 on a free port."""

    def __init__(self):
        self._cond = threading.Condition()
        self._store = Store(self._cond)
        self._injections: list[list] = []
        self._down = self._stopped = False
        # Counts outages, so that a watch cut by one sees it even if it only wakes after it ended.
        self._outages = 0
        self._clients: list[kubernetes.client.ApiClient] = []
        self.requests: list[RecordedRequest] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.double = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for api in self._clients:
            api.close()
        self._server.shutdown()
        self._server.server_close()

    def api_client(self) -> kubernetes.client.ApiClient:
        """A real `kubernetes` ApiClient pointed at this double, without authentication."""
        api = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=self.url))
        self._clients.append(api)
        return api

    def core_v1(self) -> kubernetes.client.CoreV1Api:
        """The real client's CoreV1Api on this double."""
        return kubernetes.client.CoreV1Api(self.api_client())

    def admissionregistration_v1(self) -> kubernetes.client.AdmissionregistrationV1Api:
        """The real client's AdmissionregistrationV1Api on this double."""
        return kubernetes.client.AdmissionregistrationV1Api(self.api_client())

    def write_kubeconfig(self, path) -> str:
        """Write a kubeconfig file that points at this double; returns its path."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "double",
            "clusters": [{"name": "double", "cluster": {"server": self.url}}],
            "users": [{"name": "double", "user": {}}],
            "contexts": [{"name": "double", "context": {"cluster": "double", "user": "double"}}],
        }
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh)
        return str(path)

    def seed(self, obj: dict) -> dict:
        """Store (create or replace) an object as a test fixture; returns the stored copy."""
        meta = obj["metadata"]
        key = Store.key(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        with self._cond:
            old = self._store.objects.get(key)
            return copy.deepcopy(self._store.put(key, copy.deepcopy(obj), old))

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None):
        """The stored object, or None."""
        with self._cond:
            return copy.deepcopy(
                self._store.objects.get(Store.key(api_version, kind, name, namespace))
            )

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Remove a stored object (KeyError if absent), emitting a DELETED watch event."""
        with self._cond:
            self._store.remove(Store.key(api_version, kind, name, namespace))

    def inject(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        reason: str = "InternalError",
    ) -> None:
        """Answer the next `times` requests matching method ("*" for any) and path with a Status."""
        with self._cond:
            self._injections.append([method.upper(), re.compile(path_regex), status, times, reason])

    def set_down(self, down: bool) -> None:
        """Simulate an outage: every request answers 503 and open watches are cut."""
        with self._cond:
            self._down = down
            self._outages += down
            self._cond.notify_all()

    def compact(self) -> None:
        """Forget watch history, so a watch from any older resourceVersion gets 410 Expired."""
        with self._cond:
            self._store.compact()

    # --- HTTP ---

    def _serve(self, handler: _Handler, body: bytes | None):
        split = urlsplit(handler.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        method, ctype = handler.command, handler.headers.get("Content-Type")
        with self._cond:
            self.requests.append(RecordedRequest(method, split.path, query, ctype, body))
        try:
            self._check_faults(method, split.path)
            m = _PATH.match(split.path)
            gv = m and (m["core"] or m["group"])
            if not m or (gv, m["plural"]) not in RESOURCES:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if bool(m["ns"]) and not RESOURCES[(gv, m["plural"])][1]:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if method == "GET" and not m["name"] and query.get("watch") in ("true", "1"):
                return self._watch(handler, gv, m["plural"], m["ns"], query)
            code, payload = self._dispatch(method, gv, m, query, ctype, body)
        except ApiError as err:
            code, payload = err.code, err.status()
        handler.send_json(code, payload)

    def _check_faults(self, method: str, path: str):
        with self._cond:
            if self._down:
                raise ApiError(503, "ServiceUnavailable", "the API server is down (simulated)")
            for inj in self._injections:
                if inj[3] > 0 and inj[0] in ("*", method) and inj[1].search(path):
                    inj[3] -= 1
                    raise ApiError(inj[2], inj[4], f"injected failure for {method} {path}")

    def _dispatch(self, method, gv, m, query, ctype, body) -> tuple[int, dict]:
        plural, ns, name = m["plural"], m["ns"] or "", m["name"]
        dry = query.get("dryRun") == "All"
        with self._cond:
            if name is None and method == "GET":
                return 200, self._store.collection(gv, plural, ns, query)
            if name is None and method == "POST":
                obj = decode(body, dict)
                meta = obj.setdefault("metadata", {})
                if meta.get("namespace", ns) != ns:
                    raise ApiError(
                        400,
                        "BadRequest",
                        "the namespace of the provided object does "
                        "not match the namespace sent on the request",
                    )
                if not meta.get("name") and meta.get("generateName"):
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
                key = (gv, plural, ns, meta.get("name"))
                if not key[3]:
                    raise ApiError(
                        422, "Invalid", "metadata.name: Required value: name is required"
                    )
                if key in self._store.objects:
                    raise ApiError(
                        409,
                        "AlreadyExists",
                        f'{qualified(gv, plural)} "{key[3]}" already exists',
                        {"name": key[3], "kind": plural},
                    )
                return 201, copy.deepcopy(obj if dry else self._store.put(key, obj, None))
            key = (gv, plural, ns, name)
            if name is None or key not in self._store.objects:
                raise not_found(gv, plural, name or "")
            old = self._store.objects[key]
            if method == "GET":
                return 200, copy.deepcopy(old)
            if method == "DELETE":
                gone = old if dry else self._store.remove(key)
                return 200, {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {"name": name, "kind": plural, "uid": gone["metadata"]["uid"]},
                }
            new = written(method, old, ctype, body)
            if new["metadata"].get("name", name) != name:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the name of the object "
                    f"({new['metadata']['name']}) does not match the name on the URL "
                    f"({name})",
                )
            wanted = new["metadata"].get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Operation cannot be fulfilled on "
                    f'{qualified(gv, plural)} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    {"name": name, "kind": plural},
                )
            return 200, copy.deepcopy(new if dry else self._store.put(key, new, old))

    def _watch(self, handler: _Handler, gv, plural, ns, query):
        match = self._store.matcher(gv, plural, ns or "", query)
        seconds = float(query.get("timeoutSeconds") or 0)
        deadline = time.monotonic() + seconds if seconds else None
        with self._cond:
            pending, cursor = self._store.watch_start(query.get("resourceVersion", ""), match)
            outages = self._outages
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            while True:
                for event in pending:
                    handler.send_chunk(event)
                if cursor is None:
                    break
                with self._cond:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._cond.wait_for(partial(self._woken, cursor, outages), left)
                    if self._stopped or self._outages != outages:
                        # an outage cuts the stream mid-way: no terminating chunk
                        handler.close_connection = True
                        return
                    pending, cursor = self._store.changes(cursor, match)
            handler.send_chunk(None)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True

    def _woken(self, cursor: int, outages: int) -> bool:
        """A watch waiting after `cursor` has something to do (callers hold self._cond)."""
        events = self._store.events
        return self._stopped or self._outages != outages or bool(events and events[-1][0] > cursor)
