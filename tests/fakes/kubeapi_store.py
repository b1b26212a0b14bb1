"""The storage behind the Kubernetes API test double (tests/fakes/kubeapi.py); a double, not etcd.

Everything the double does apart from HTTP: the resources it serves, objects under one global,
monotonically increasing resourceVersion with the watch history that compaction forgets, label
and field selectors, and the three PATCH content types. Errors are `ApiError`s, which the double
answers as the `kind: Status` bodies of the real apiserver.
"""

import copy
import json
import re
import threading
import uuid
from datetime import UTC, datetime

import jsonpatch

# (apiVersion, plural) -> (kind, namespaced)
RESOURCES = {
    ("v1", "secrets"): ("Secret", True),
    ("v1", "configmaps"): ("ConfigMap", True),
    ("v1", "nodes"): ("Node", False),
    ("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations"): (
        "MutatingWebhookConfiguration",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations"): (
        "ValidatingWebhookConfiguration",
        False,
    ),
}
# (apiVersion, kind) -> plural
PLURALS = {(gv, kind): plural for (gv, plural), (kind, _) in RESOURCES.items()}
# Strategic merge patch merges these lists item by item (the Go types' patchMergeKey).
_MERGE_KEYS = {"webhooks": "name"}
_SELECTOR = re.compile(
    r"^\s*(?P<neg>!?)\s*(?P<key>[\w./-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<val>[\w.-]*)"
    r"|\s+(?P<set>in|notin)\s*\((?P<vals>[^)]*)\))?\s*$"
)


class ApiError(Exception):
    """An error the API answers as a `kind: Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.details = code, reason, details or {}

    def status(self) -> dict:
        """The Status object the real apiserver would send."""
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": str(self),
            "reason": self.reason,
            "details": self.details,
            "code": self.code,
        }


def qualified(gv: str, plural: str) -> str:
    """`secrets` or `mutatingwebhookconfigurations.admissionregistration.k8s.io`, as in messages."""
    return plural if "/" not in gv else f"{plural}.{gv.split('/')[0]}"


def not_found(gv: str, plural: str, name: str) -> ApiError:
    """The 404 for a named object that is not stored."""
    details = {"name": name, "kind": plural} | ({"group": gv.split("/")[0]} if "/" in gv else {})
    return ApiError(404, "NotFound", f'{qualified(gv, plural)} "{name}" not found', details)


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
        elif (
            strategic and key in _MERGE_KEYS and isinstance(value, list) and isinstance(have, list)
        ):
            mk = _MERGE_KEYS[key]
            merged = {item.get(mk): item for item in have}
            for item in value:
                merged[item.get(mk)] = merge_patch(merged.get(item.get(mk)), item, strategic)
            result[key] = list(merged.values())
        else:
            result[key] = merge_patch(have, value, strategic)
    return result


def decode(body: bytes | None, want: type):
    """The JSON request body, which must be a `want` (dict or list); else a 400."""
    try:
        doc = json.loads(body or b"")
    except ValueError as err:
        raise ApiError(400, "BadRequest", f"invalid JSON body: {err}") from err
    if not isinstance(doc, want):
        raise ApiError(400, "BadRequest", f"body must be a JSON {want.__name__}")
    return doc


def written(method: str, old: dict, content_type: str | None, body: bytes | None) -> dict:
    """The object a PUT or PATCH of `old` asks for (not yet checked or stored)."""
    mime = (content_type or "").split(";")[0].strip()
    if method == "PUT":
        return decode(body, dict)
    if method != "PATCH":
        raise ApiError(405, "MethodNotAllowed", f"{method} is not supported")
    if mime == "application/json-patch+json":
        try:
            return jsonpatch.apply_patch(old, decode(body, list))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
            raise ApiError(422, "Invalid", f"the server rejected our request: {err}") from err
    if mime in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        return merge_patch(old, decode(body, dict), mime.startswith("application/strat"))
    raise ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown "
        "format - accepted media types include: application/json-patch+json, "
        "application/merge-patch+json, application/strategic-merge-patch+json",
    )


class Store:
    """Objects keyed (apiVersion, plural, namespace or "", name), and their change history.

    Callers hold `cond`; every stored change notifies it, which is what open watches wait on.
    """

    def __init__(self, cond: threading.Condition):
        self.cond = cond
        self.objects: dict[tuple, dict] = {}
        self.events: list[tuple] = []  # (rv, gv, plural, type, object, previous object)
        # "0" means "any version" to a watch, so real versions start above it
        self.rv = self.compacted = 1

    @staticmethod
    def key(api_version: str, kind: str, name: str, namespace: str | None = None) -> tuple:
        """The storage key of an object of a served kind."""
        return api_version, PLURALS[(api_version, kind)], namespace or "", name

    def put(self, key: tuple, obj: dict, old: dict | None) -> dict:
        """Store `obj` under `key` (replacing `old`), with a new resourceVersion; returns it."""
        gv, plural, ns, name = key
        obj.update(apiVersion=gv, kind=RESOURCES[(gv, plural)][0])
        meta = obj.setdefault("metadata", {})
        meta.update(name=name, **({"namespace": ns} if ns else {}))
        if old is not None:
            meta.update(
                uid=old["metadata"]["uid"],
                creationTimestamp=old["metadata"]["creationTimestamp"],
                resourceVersion=old["metadata"]["resourceVersion"],
            )
            if obj == old:  # a no-op write keeps the resourceVersion and emits no event
                return old
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        self._emit(gv, plural, "ADDED" if old is None else "MODIFIED", obj, old)
        return obj

    def remove(self, key: tuple) -> dict:
        """Delete the object under `key` (KeyError if absent); returns it as last seen."""
        obj = copy.deepcopy(self.objects.pop(key))
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._emit(key[0], key[1], "DELETED", obj, None)
        return obj

    def _emit(self, gv, plural, etype, obj, old):
        self.events.append((self.rv, gv, plural, etype, copy.deepcopy(obj), copy.deepcopy(old)))
        self.cond.notify_all()

    def compact(self) -> None:
        """Forget the history: watches from any older resourceVersion get 410 Expired."""
        self.compacted = self.rv
        self.events.clear()

    @staticmethod
    def matcher(gv: str, plural: str, ns: str, query: dict):
        """A predicate (key, object) for the collection and selectors of a list or watch."""
        labels = parse_selector(query.get("labelSelector", ""))
        fields = parse_selector(query.get("fieldSelector", ""), fields=True)
        return lambda key, obj: (
            key[:2] == (gv, plural) and (not ns or key[2] == ns) and labels(obj) and fields(obj)
        )

    def collection(self, gv: str, plural: str, ns: str, query: dict) -> dict:
        """The `<Kind>List` a GET of the collection answers."""
        match = self.matcher(gv, plural, ns, query)
        # typed lists carry no kind/apiVersion on their items, as on the real apiserver
        items = [
            {k: v for k, v in copy.deepcopy(obj).items() if k not in ("kind", "apiVersion")}
            for key, obj in sorted(self.objects.items())
            if match(key, obj)
        ]
        return {
            "kind": RESOURCES[(gv, plural)][0] + "List",
            "apiVersion": gv,
            "metadata": {"resourceVersion": str(self.rv)},
            "items": items,
        }

    def watch_start(self, since: str, match) -> tuple[list[dict], int | None]:
        """(first events, cursor) of a watch from resourceVersion `since`; cursor None: it ends."""
        if since in ("", "0"):  # "most recent": synthetic ADDED events for the current state
            return [
                {"type": "ADDED", "object": copy.deepcopy(obj)}
                for key, obj in sorted(self.objects.items())
                if match(key, obj)
            ], self.rv
        if int(since) < self.compacted:
            return [
                {
                    "type": "ERROR",
                    "object": ApiError(
                        410, "Expired", f"too old resource version: {since} ({self.compacted})"
                    ).status(),
                }
            ], None
        return [], int(since)

    def changes(self, cursor: int, match) -> tuple[list[dict], int]:
        """The watch events after `cursor` for `match`, and the new cursor."""
        fresh = [e for e in self.events if e[0] > cursor]
        events = (self._as_seen(e, match) for e in fresh)
        return [e for e in events if e], fresh[-1][0] if fresh else cursor

    @staticmethod
    def _as_seen(event: tuple, match) -> dict | None:
        """A stored change as one watcher sees it: leaving its selector reads as DELETED."""
        _, gv, plural, etype, obj, old = event
        key = (gv, plural, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        now, before = match(key, obj), old is not None and match(key, old)
        if etype == "MODIFIED" and not (now and before):
            etype = "ADDED" if now else "DELETED" if before else None
        return {"type": etype, "object": obj} if etype and (now or before) else None
