"""Server-side apply, modelled simply; a test double of the apiserver's field manager.

`k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager` with `sigs.k8s.io/structured-merge-diff`
(`merge.Updater.Apply`): a manager owns the fields of the configuration it last applied (its
leaves, and the items of associative lists, keyed as `MERGE_KEYS` says; atomic lists whole). A
new apply by that manager sets every field of the new configuration and removes the fields it
owned before and no longer applies, unless another manager owns them too; fields it never owned
are kept. Setting a field another manager owns to another value is a conflict (HTTP 409,
`Apply failed with N conflict(s)`) unless forced. An apply to an absent object creates it.

Mutating admission runs after the field manager in the update and patch handlers (kubernetes
issue #87672), so the webhook's changes are owned by no manager here: a later apply keeps
them unless it sets them itself. Ownership is kept beside the store, not in
`metadata.managedFields`; managers of plain updates are not tracked.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import Key, Store, key_of
from tests.fakes.kubectl_apply import MERGE_KEYS

# A field path: map keys, and (merge key, value) for an item of an associative list.
Path = tuple[object, ...]


class Conflict(Exception):
    """The apply would change fields another manager owns."""


def _associative(name: object, value: object) -> str | None:
    key = MERGE_KEYS.get(name) if isinstance(name, str) else None
    if key and isinstance(value, list) and all(isinstance(i, dict) and key in i for i in value):
        return key
    return None


def fields(config: object, path: Path = ()) -> set[Path]:
    """The fields a configuration sets: leaves, associative-list items, atomic lists."""
    if not isinstance(config, dict) or not config:
        return {path} if path else set()
    found: set[Path] = set()
    for name, value in config.items():
        if key := _associative(name, value):
            for item in value:
                at = (*path, name, (key, item[key]))
                found |= {at} | fields(item, at)
        else:
            found |= fields(value, (*path, name))
    return found


def _step(node: object, element: object) -> object:
    if isinstance(element, tuple):
        key, value = element
        return (
            next((i for i in node if i.get(key) == value), None) if isinstance(node, list) else None
        )
    return node.get(element) if isinstance(node, dict) else None


def value_at(obj: object, path: Path) -> object:
    """The value at `path`, or None."""
    for element in path:
        obj = _step(obj, element)
    return obj


def _remove(obj: dict, path: Path) -> None:
    parent = value_at(obj, path[:-1])
    last = path[-1]
    if isinstance(last, tuple) and isinstance(parent, list):
        parent[:] = [i for i in parent if i.get(last[0]) != last[1]]
    elif isinstance(parent, dict):
        parent.pop(last, None)


def _merge(live: object, config: object, name: object = None) -> object:
    if isinstance(live, dict) and isinstance(config, dict):
        merged = copy.deepcopy(live)
        for key, value in config.items():
            merged[key] = _merge(live.get(key), value, key)
        return merged
    key = _associative(name, config)
    if key and _associative(name, live):
        merged = copy.deepcopy(live)
        for item in config:
            match = next((i for i in merged if i.get(key) == item[key]), None)
            if match is None:
                merged.append(copy.deepcopy(item))
            else:
                merged[merged.index(match)] = _merge(match, item)
        return merged
    return copy.deepcopy(config)


def merge_apply(
    live: dict, config: dict, owned: set[Path], others: dict[str, set[Path]], force: bool = False
) -> dict:
    """`live` after an apply of `config` by a manager that owned `owned`."""
    kept = set().union(*others.values()) if others else set()
    applied = fields(config)
    conflicts = sorted(
        (manager, path)
        for manager, paths in others.items()
        for path in applied & paths
        if value_at(live, path) != value_at(config, path) and not isinstance(path[-1], tuple)
    )
    if conflicts and not force:
        listed = "; ".join(f'conflict with "{m}": .{".".join(map(str, p))}' for m, p in conflicts)
        raise Conflict(f"Apply failed with {len(conflicts)} conflict(s): {listed}")
    obj = copy.deepcopy(live)
    removed: list[Path] = []
    for path in sorted(owned - applied - kept, key=len):
        if any(path[: len(r)] == r for r in removed):
            continue  # inside an item already removed
        if len(path) > 1 and isinstance(path[-2], tuple) and path[-1] == path[-2][0]:
            continue  # an item's key is its identity, removed with the item only
        _remove(obj, path)
        removed.append(path)
    return _merge(obj, config)


@dataclass
class ServerSideApply:
    """`kubectl apply --server-side` against a store, with each object's managers' fields."""

    store: Store
    managers: dict[Key, dict[str, set[Path]]] = field(default_factory=dict)

    def apply(
        self,
        config: dict,
        manager: str = "kubectl",
        namespace: str = "default",
        force: bool = False,
    ) -> Result:
        """One apply PATCH: a CREATE of an absent object, else an UPDATE."""
        config = copy.deepcopy(config)
        config.setdefault("metadata", {})["namespace"] = namespace
        key = key_of(config)
        live = self.store.get(key)
        owners = self.managers.setdefault(key, {})
        if live is None:
            result = self.store.create(config, namespace)
        else:
            others = {m: p for m, p in owners.items() if m != manager}
            new = merge_apply(live, config, owners.get(manager, set()), others, force)
            result = self.store.update(new)
        if result.allowed:
            owners[manager] = fields(config)
            if force:
                for other in owners:
                    if other != manager:
                        owners[other] -= owners[manager]
        return result
