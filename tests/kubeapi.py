"""A test double of the Kubernetes API server that speaks the real REST wire protocol.

No kube-apiserver can run on the test machines, so tests point the real `kubernetes` client
(or anything else that talks HTTP) at this loopback server instead. It serves the exact REST
paths, `kind: Status` error bodies, a global monotonically increasing resourceVersion,
optimistic concurrency, the three PATCH content types and chunked watch streams for:
core/v1 secrets and configmaps (namespaced), nodes (cluster-scoped), and
admissionregistration.k8s.io/v1 mutating/validating webhook configurations (cluster-scoped).
Tests can inject failures (`inject`), simulate an outage (`set_down`) and expire watch history
(`compact`), and read every request back from `requests`.
"""

import copy
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import parse_qs, urlsplit

import jsonpatch
import kubernetes.client

# (apiVersion, plural) -> (kind, namespaced)
RESOURCES = {
    ("v1", "secrets"): ("Secret", True),
    ("v1", "configmaps"): ("ConfigMap", True),
    ("v1", "nodes"): ("Node", False),
    ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"):
        ("MutatingWebhookConfiguration", False),
    ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"):
        ("ValidatingWebhookConfiguration", False),
}
_PLURALS = {(gv, kind): plural for (gv, plural), (kind, _) in RESOURCES.items()}
_PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+/[^/]+))"
                   r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?/?$")
# Strategic merge patch merges these lists item by item (the Go types' patchMergeKey).
_MERGE_KEYS = {"webhooks": "name"}
_SELECTOR = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[\w./-]+)\s*"
                       r"(?:(?P<op>==|=|!=)\s*(?P<val>[\w.-]*)"
                       r"|\s+(?P<set>in|notin)\s*\((?P<vals>[^)]*)\))?\s*$")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the double received it."""
    method: str
    path: str
    query: dict
    content_type: str | None
    body: bytes | None


class ApiError(Exception):
    """An error the API answers as a `kind: Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.details = code, reason, details or {}

    def status(self) -> dict:
        """The Status object the real apiserver would send."""
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": str(self), "reason": self.reason, "details": self.details,
                "code": self.code}


def wait_for(predicate, seconds: float = 10.0):
    """Poll `predicate` until it is truthy or `seconds` pass; returns its last value.

    For tests that await a background effect (a watch event, a retry) without fixed sleeps.
    """
    deadline = time.monotonic() + seconds
    while not (result := predicate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return result


def _qualified(gv: str, plural: str) -> str:
    """`secrets` or `mutatingwebhookconfigurations.admissionregistration.k8s.io`, as in messages."""
    return plural if "/" not in gv else f"{plural}.{gv.split('/')[0]}"


def _not_found(gv: str, plural: str, name: str) -> ApiError:
    details = {"name": name, "kind": plural} | ({"group": gv.split("/")[0]} if "/" in gv else {})
    return ApiError(404, "NotFound", f'{_qualified(gv, plural)} "{name}" not found', details)


def parse_selector(expr: str, fields: bool = False):
    """Compile a label (or field) selector string into a predicate over an object dict."""
    reqs = []
    for part in filter(str.strip, re.split(r",(?![^(]*\))", expr or "")):
        m = _SELECTOR.match(part)
        if not m or (fields and (m["neg"] or m["set"] or not m["op"])):
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
        reqs.append(m)

    def value(obj: dict, key: str):
        if fields:
            for step in key.split("."):
                obj = obj.get(step) if isinstance(obj, dict) else None
            return "" if obj is None else str(obj)
        return obj.get("metadata", {}).get("labels", {}).get(key)

    def ok(m, obj: dict) -> bool:
        have = value(obj, m["key"])
        if m["op"]:
            return (have == m["val"]) == (m["op"] != "!=")
        if m["set"]:
            vals = {v.strip() for v in m["vals"].split(",")}
            return (have in vals) if m["set"] == "in" else (have not in vals)
        return (have is None) == bool(m["neg"])

    return lambda obj: all(ok(m, obj) for m in reqs)


def merge_patch(target, patch, strategic: bool = False):
    """RFC 7386 merge patch; `strategic` also merges the known keyed lists by their key."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        have = result.get(key)
        if value is None:
            result.pop(key, None)
        elif strategic and key in _MERGE_KEYS and isinstance(value, list) \
                and isinstance(have, list):
            mk = _MERGE_KEYS[key]
            merged = {item.get(mk): item for item in have}
            for item in value:
                merged[item.get(mk)] = merge_patch(merged.get(item.get(mk)), item, strategic)
            result[key] = list(merged.values())
        else:
            result[key] = merge_patch(have, value, strategic)
    return result


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
        self._objects: dict[tuple, dict] = {}
        self._events: list[tuple] = []  # (rv, gv, plural, type, object, previous object)
        # "0" means "any version" to a watch, so real versions start above it
        self._rv = self._compacted = 1
        self._injections: list[list] = []
        self._down = self._stopped = False
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

    def write_kubeconfig(self, path) -> str:
        """Write a kubeconfig file that points at this double; returns its path."""
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "double",
                  "clusters": [{"name": "double", "cluster": {"server": self.url}}],
                  "users": [{"name": "double", "user": {}}],
                  "contexts": [{"name": "double",
                                "context": {"cluster": "double", "user": "double"}}]}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh)
        return str(path)

    def seed(self, obj: dict) -> dict:
        """Store (create or replace) an object as a test fixture; returns the stored copy."""
        gv, meta = obj["apiVersion"], obj["metadata"]
        plural = _PLURALS[(gv, obj["kind"])]
        key = (gv, plural, meta.get("namespace") or "", meta["name"])
        with self._cond:
            return copy.deepcopy(self._store(key, copy.deepcopy(obj), self._objects.get(key)))

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None):
        """The stored object, or None."""
        with self._cond:
            plural = _PLURALS[(api_version, kind)]
            return copy.deepcopy(self._objects.get((api_version, plural, namespace or "", name)))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """Remove a stored object (KeyError if absent), emitting a DELETED watch event."""
        with self._cond:
            self._remove((api_version, _PLURALS[(api_version, kind)], namespace or "", name))

    def inject(self, method: str, path_regex: str, status: int, times: int = 1,
               reason: str = "InternalError") -> None:
        """Answer the next `times` requests matching method ("*" for any) and path with a Status."""
        with self._cond:
            self._injections.append([method.upper(), re.compile(path_regex), status, times, reason])

    def set_down(self, down: bool) -> None:
        """Simulate an outage: every request answers 503 and open watches are cut."""
        with self._cond:
            self._down = down
            self._cond.notify_all()

    def compact(self) -> None:
        """Forget watch history, so a watch from any older resourceVersion gets 410 Expired."""
        with self._cond:
            self._compacted = self._rv
            self._events.clear()

    # --- storage (callers hold self._cond) ---

    def _store(self, key: tuple, obj: dict, old: dict | None) -> dict:
        gv, plural, ns, name = key
        kind = RESOURCES[(gv, plural)][0]
        obj.update(apiVersion=gv, kind=kind)
        meta = obj.setdefault("metadata", {})
        meta.update(name=name, **({"namespace": ns} if ns else {}))
        if old is not None:
            meta.update(uid=old["metadata"]["uid"],
                        creationTimestamp=old["metadata"]["creationTimestamp"],
                        resourceVersion=old["metadata"]["resourceVersion"])
            if obj == old:  # a no-op write keeps the resourceVersion and emits no event
                return old
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp",
                            datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        self._objects[key] = obj
        self._emit(gv, plural, "ADDED" if old is None else "MODIFIED", obj, old)
        return obj

    def _remove(self, key: tuple) -> dict:
        obj = self._objects.pop(key)
        self._rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._emit(key[0], key[1], "DELETED", obj, None)
        return obj

    def _emit(self, gv, plural, etype, obj, old):
        self._events.append((self._rv, gv, plural, etype, copy.deepcopy(obj), copy.deepcopy(old)))
        self._cond.notify_all()

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
                return 200, self._list(gv, plural, ns, query)
            if name is None and method == "POST":
                obj = self._decode(body, dict)
                meta = obj.setdefault("metadata", {})
                if meta.get("namespace", ns) != ns:
                    raise ApiError(400, "BadRequest", "the namespace of the provided object does "
                                   "not match the namespace sent on the request")
                if not meta.get("name") and meta.get("generateName"):
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
                key = (gv, plural, ns, meta.get("name"))
                if not key[3]:
                    raise ApiError(422, "Invalid",
                                   "metadata.name: Required value: name is required")
                if key in self._objects:
                    raise ApiError(409, "AlreadyExists",
                                   f'{_qualified(gv, plural)} "{key[3]}" already exists',
                                   {"name": key[3], "kind": plural})
                return 201, copy.deepcopy(obj if dry else self._store(key, obj, None))
            key = (gv, plural, ns, name)
            if name is None or key not in self._objects:
                raise _not_found(gv, plural, name or "")
            old = self._objects[key]
            if method == "GET":
                return 200, copy.deepcopy(old)
            if method == "DELETE":
                gone = old if dry else self._remove(key)
                return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Success", "details": {"name": name, "kind": plural,
                                                               "uid": gone["metadata"]["uid"]}}
            new = self._updated(method, old, ctype, body)
            if new["metadata"].get("name", name) != name:
                raise ApiError(400, "BadRequest", "the name of the object "
                               f"({new['metadata']['name']}) does not match the name on the URL "
                               f"({name})")
            wanted = new["metadata"].get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on '
                               f'{_qualified(gv, plural)} "{name}": the object has been modified; '
                               "please apply your changes to the latest version and try again",
                               {"name": name, "kind": plural})
            return 200, copy.deepcopy(new if dry else self._store(key, new, old))

    def _updated(self, method, old, ctype, body) -> dict:
        mime = (ctype or "").split(";")[0].strip()
        if method == "PUT":
            return self._decode(body, dict)
        if method != "PATCH":
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")
        if mime == "application/json-patch+json":
            try:
                return jsonpatch.apply_patch(old, self._decode(body, list))
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
                raise ApiError(422, "Invalid", f"the server rejected our request: {err}") from err
        if mime in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            return merge_patch(old, self._decode(body, dict), mime.startswith("application/strat"))
        raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                       "format - accepted media types include: application/json-patch+json, "
                       "application/merge-patch+json, application/strategic-merge-patch+json")

    @staticmethod
    def _decode(body: bytes | None, want: type):
        try:
            doc = json.loads(body or b"")
        except ValueError as err:
            raise ApiError(400, "BadRequest", f"invalid JSON body: {err}") from err
        if not isinstance(doc, want):
            raise ApiError(400, "BadRequest", f"body must be a JSON {want.__name__}")
        return doc

    def _matches(self, gv, plural, ns, query):
        labels = parse_selector(query.get("labelSelector", ""))
        fields = parse_selector(query.get("fieldSelector", ""), fields=True)
        return lambda key, obj: (key[:2] == (gv, plural) and (not ns or key[2] == ns)
                                 and labels(obj) and fields(obj))

    def _list(self, gv, plural, ns, query) -> dict:
        match = self._matches(gv, plural, ns, query)
        items = []
        for key, obj in sorted(self._objects.items()):
            if match(key, obj):
                # typed lists carry no kind/apiVersion on their items, as on the real apiserver
                items.append({k: v for k, v in copy.deepcopy(obj).items()
                              if k not in ("kind", "apiVersion")})
        return {"kind": RESOURCES[(gv, plural)][0] + "List", "apiVersion": gv,
                "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def _watch(self, handler: _Handler, gv, plural, ns, query):
        match = self._matches(gv, plural, ns or "", query)
        seconds = float(query.get("timeoutSeconds") or 0)
        deadline = time.monotonic() + seconds if seconds else None
        since = query.get("resourceVersion", "")
        with self._cond:
            if since in ("", "0"):  # "most recent": synthetic ADDED events for the current state
                pending = [{"type": "ADDED", "object": copy.deepcopy(obj)}
                           for key, obj in sorted(self._objects.items()) if match(key, obj)]
                cursor = self._rv
            elif int(since) < self._compacted:
                pending, cursor = [{"type": "ERROR", "object": ApiError(
                    410, "Expired", f"too old resource version: {since} ({self._compacted})"
                ).status()}], None
            else:
                pending, cursor = [], int(since)
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
                    self._cond.wait_for(partial(self._woken, cursor), left)
                    if self._stopped or self._down:
                        # an outage cuts the stream mid-way: no terminating chunk
                        handler.close_connection = True
                        return
                    fresh = [e for e in self._events if e[0] > cursor]
                cursor = fresh[-1][0] if fresh else cursor
                pending = [ev for ev in (self._translate(e, match) for e in fresh) if ev]
            handler.send_chunk(None)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True

    def _woken(self, cursor: int) -> bool:
        """A watch waiting after `cursor` has something to do (callers hold self._cond)."""
        return self._stopped or self._down or bool(self._events and self._events[-1][0] > cursor)

    @staticmethod
    def _translate(event: tuple, match) -> dict | None:
        """A stored change as this watcher sees it: leaving its selector reads as DELETED."""
        _, gv, plural, etype, obj, old = event
        key = (gv, plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        now, before = match(key, obj), old is not None and match(key, old)
        if etype == "MODIFIED" and not (now and before):
            etype = "ADDED" if now else "DELETED" if before else None
        return {"type": etype, "object": obj} if etype and (now or before) else None
