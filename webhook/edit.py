"""Copy-on-write edits of a JSON document that record their RFC 6902 operations as they go.

The decision changes a handful of fields deep inside a pod that may be megabytes
large. Deep-copying the pod and diffing it afterwards costs time proportional to
the whole object; this editor copies only the maps and lists on the path to each
change and writes the JSON Patch operation for it at the same moment, so both
the rewritten object and its patch cost time proportional to the change. The
input document is never modified. Property tests check that applying the
operations (with `jsonpatch` and with `kubectl patch`) yields the same object.
"""

from __future__ import annotations

import copy
from typing import Any, Sequence

from .workload import pointer

Path = Sequence[str | int]


class Editor:
    """Edits `root` copy-on-write; `root` and `ops` hold the result."""

    def __init__(self, root: Any):
        self.root = root
        self.ops: list[dict] = []
        self._owned: set[int] = set()

    def get(self, path: Path) -> Any:
        """The current value at `path` (None where a step is missing); never copies."""
        node = self.root
        for key in path:
            if isinstance(node, dict):
                node = node.get(key)
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                node = node[key]
            else:
                return None
        return node

    def _own(self, path: Path) -> Any:
        """The container at `path`, shallow-copied (once) along with every container above it."""
        if not path:
            if id(self.root) not in self._owned:
                self.root = copy.copy(self.root)
                self._owned.add(id(self.root))
            return self.root
        parent = self._own(path[:-1])
        child = parent[path[-1]]
        if id(child) not in self._owned:
            child = parent[path[-1]] = copy.copy(child)
            self._owned.add(id(child))
        return child

    def _record(self, op: str, path: Path, value: Any = None) -> None:
        entry = {"op": op, "path": pointer(path)}
        if op != "remove":
            # The recorded value must not follow later edits of the inserted map or list.
            entry["value"] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value
        self.ops.append(entry)

    def set(self, path: Path, value: Any) -> None:
        """Set a map member (add or replace); nothing happens when it already holds `value`."""
        parent = self._own(path[:-1])
        key = path[-1]
        if key in parent and parent[key] == value:
            return
        op = "replace" if key in parent else "add"
        parent[key] = value
        if isinstance(value, (dict, list)):
            self._owned.add(id(value))
        self._record(op, path, value)

    def remove(self, path: Path) -> None:
        """Remove a map member if present."""
        if path[-1] not in _as_map(self.get(path[:-1])):
            return
        del self._own(path[:-1])[path[-1]]
        self._record("remove", path)

    def append(self, path: Path, value: Any) -> None:
        """Append to the list at `path`."""
        self._own(path).append(value)
        self._record("add", [*path, "-"], value)

    def ensure(self, path: Path, kind: type) -> None:
        """Make the member at `path` a map (dict) or list, replacing `null` or a wrong type."""
        if not isinstance(self.get(path), kind):
            self.set(path, kind())


def _as_map(value: Any) -> dict:
    return value if isinstance(value, dict) else {}
