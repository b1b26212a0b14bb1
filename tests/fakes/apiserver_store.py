"""Objects kept between requests, each write sent through the admission chain; a test double of
kube-apiserver's registry, not etcd.

`Store` does what `k8s.io/apiserver/pkg/registry/generic/registry/store.go` (`Store.Create`,
`Store.Update`, `Store.Delete`) and `pkg/registry/rest` (`BeforeCreate`, `BeforeUpdate`) do around
admission, and nothing more:

- every CREATE, UPDATE and DELETE goes through `admission`, the dispatcher of
  tests/fakes/apiserver_harness.py with defaulting (apiserver_defaults.py) and validation
  (apiserver_validation.py); until `install()` it has no webhooks, so objects written then exist
  unreviewed, as in a cluster where the webhook is installed later;
- a schema-invalid object is refused (strict field validation, kubectl's default);
- `BeforeCreate`: a name from `generateName` (`names.SimpleNameGenerator`: the base and five
  characters of `bcdfghjklmnpqrstvwxz2456789`, here counted instead of random), uid,
  creationTimestamp, resourceVersion, and `metadata.generation` 1 for kinds with a spec;
- `PrepareForUpdate`: the status is kept from the stored object (only the status subresource
  writes it) and a changed spec bumps the generation; an update that leaves a deleting object
  without finalizers deletes it (`Store.Update` -> `deleteWithoutFinalizers`);
- `Delete` of an object with finalizers only sets deletionTimestamp;
- the `scale` and `status` subresources write without calling the webhooks: a rule matches a
  subresource only when it names one (`deployments/scale`), and `scale()` refuses to pretend
  when an installed rule does.

Left out: resourceVersion preconditions and conflicts, garbage collection, watch, managedFields.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tests.fakes.apiserver_defaults import default
from tests.fakes.apiserver_harness import Apiserver, Result
from tests.fakes.apiserver_validation import validate

# (group, kind, namespace, name)
Key = tuple[str, str, str, str]
NAME_CHARACTERS = "bcdfghjklmnpqrstvwxz2456789"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class StoreError(Exception):
    """An error the registry answers (`AlreadyExists`, `NotFound`), with its reason."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def key_of(obj: dict) -> Key:
    """Where `obj` is stored: its API group, kind, namespace and name."""
    meta = obj.get("metadata") or {}
    group = obj["apiVersion"].rpartition("/")[0]
    return group, obj["kind"], meta.get("namespace", ""), meta.get("name", "")


def _qualified(key: Key) -> str:
    group, kind = key[:2]
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    return f"{plural}.{group}" if group else plural


@dataclass
class Request:
    """One write the store took: its operation (or subresource) and what admission answered."""

    operation: str
    key: Key
    result: Result | None  # None: a subresource write, which no webhook sees


@dataclass
class Store:
    """The objects, the admission chain in front of them, and the log of writes."""

    namespace_labels: dict[str, dict] = field(default_factory=lambda: {"default": {}})
    admission: Apiserver = field(
        default_factory=lambda: Apiserver([], {}, defaulter=default, validator=validate)
    )
    objects: dict[Key, dict] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    _serial: itertools.count = field(default_factory=lambda: itertools.count(1), repr=False)

    def install(self, apiserver: Apiserver) -> None:
        """The webhook configurations are created: later requests go through their webhooks."""
        self.admission = dataclasses.replace(apiserver, defaulter=default, validator=validate)

    def get(self, key: Key) -> dict | None:
        """A copy of the stored object, or None."""
        return copy.deepcopy(self.objects.get(key))

    def of_kind(self, group: str, kind: str, namespace: str | None = None) -> list[dict]:
        """Copies of the objects of a kind, oldest first."""
        return [
            copy.deepcopy(o)
            for k, o in self.objects.items()
            if k[:2] == (group, kind) and namespace in (None, k[2])
        ]

    def _admit(self, obj: dict, namespace: str, operation: str, old: dict | None) -> Result:
        labels = self.namespace_labels.get(namespace, {})
        result = self.admission.admit(obj, namespace, labels, operation=operation, old=old)
        if result.allowed and result.schema_error:
            result.allowed = False
            result.message = f"strict decoding error: {result.schema_error}"
        return result

    def create(self, obj: dict, namespace: str = "default") -> Result:
        """POST: admission, then `BeforeCreate`; raises StoreError AlreadyExists."""
        result = self._admit(obj, namespace, "CREATE", None)
        meta = result.obj.setdefault("metadata", {})
        serial = next(self._serial)
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(
                NAME_CHARACTERS[serial // len(NAME_CHARACTERS) ** i % len(NAME_CHARACTERS)]
                for i in range(5)
            )
            meta["name"] = meta["generateName"] + suffix
        key = key_of(result.obj)
        self.requests.append(Request("CREATE", key, result))
        if not result.allowed:
            return result
        if key in self.objects:
            raise StoreError("AlreadyExists", f'{_qualified(key)} "{key[3]}" already exists')
        meta |= {
            "uid": f"00000000-0000-4000-8000-{serial:012d}",
            "creationTimestamp": (EPOCH + timedelta(seconds=serial)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "resourceVersion": str(serial),
        }
        if "spec" in result.obj and key[1] != "Pod":
            meta["generation"] = 1
        result.obj.pop("status", None)
        self.objects[key] = copy.deepcopy(result.obj)
        return result

    def update(self, obj: dict) -> Result:
        """PUT: admission with the stored object as oldObject, then `BeforeUpdate`."""
        key = key_of(obj)
        old = self._stored(key)
        result = self._admit(obj, key[2], "UPDATE", old)
        self.requests.append(Request("UPDATE", key, result))
        if result.allowed:
            result.obj = self._write(old, result.obj)
        return result

    def change(self, key: Key, edit: Callable[[dict], None]) -> Result:
        """GET, `edit` a copy, PUT it: what `kubectl edit`, `label` and `patch` amount to."""
        obj = self._stored(key)
        edit(obj)
        return self.update(obj)

    def delete(self, key: Key) -> Result:
        """DELETE: admission, then a deletionTimestamp while finalizers remain, else gone."""
        old = self._stored(key)
        result = self._admit(old, key[2], "DELETE", old)
        self.requests.append(Request("DELETE", key, result))
        if result.allowed:
            if old["metadata"].get("finalizers"):
                deleting = copy.deepcopy(old)
                deleting["metadata"]["deletionTimestamp"] = EPOCH.strftime("%Y-%m-%dT%H:%M:%SZ")
                self._write(old, deleting)
            else:
                del self.objects[key]
        return result

    def scale(self, key: Key, replicas: int) -> dict:
        """The `scale` subresource (`kubectl scale`, the HorizontalPodAutoscaler)."""
        subresources = [
            resource
            for hook in self.admission.webhooks
            for rule in hook.spec.get("rules", [])
            for resource in rule.get("resources", [])
            if "/" in resource
        ]
        if subresources:
            raise NotImplementedError(f"webhook rules name subresources {subresources}")
        old = self._stored(key)
        new = copy.deepcopy(old)
        new["spec"]["replicas"] = replicas
        self.requests.append(Request("UPDATE scale", key, None))
        return self._write(old, new)

    def update_status(self, key: Key, status: dict) -> dict:
        """The `status` subresource (what controllers write): merged into the stored status."""
        old = self._stored(key)
        new = copy.deepcopy(old)
        new["status"] = {**(old.get("status") or {}), **status}
        self.requests.append(Request("UPDATE status", key, None))
        return self._write(old, new, status=True)

    def _stored(self, key: Key) -> dict:
        if key not in self.objects:
            raise StoreError("NotFound", f'{_qualified(key)} "{key[3]}" not found')
        return copy.deepcopy(self.objects[key])

    def _write(self, old: dict, new: dict, status: bool = False) -> dict:
        """`PrepareForUpdate` and the write; an object left deleting without finalizers goes."""
        new = copy.deepcopy(new)
        meta = new.setdefault("metadata", {})
        for system in ("uid", "creationTimestamp", "generation"):
            if system in old["metadata"]:
                meta[system] = old["metadata"][system]
        if not status:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        if "generation" in meta and new.get("spec") != old.get("spec"):
            meta["generation"] += 1
        meta["resourceVersion"] = str(next(self._serial))
        key = key_of(new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.objects[key]
        else:
            self.objects[key] = copy.deepcopy(new)
        return new
