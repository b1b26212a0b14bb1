"""The Nodes a `NodeInventory` follows, each reduced to the labels its class depends on
(`webhook.scheduling.class_labels`) and counted by distinct value: a watch event then costs
the same at 15,000 Nodes as at 15, and the classes are computed from the few distinct values
only when one appears or goes (`profiles_from_labels` depends on which values exist, not on
how many Nodes carry each: tests/kube/test_node_tally.py).

Pure: no I/O, no lock (the inventory holds its own around every call).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from webhook.scheduling import class_labels

# A Node's `class_labels`: (key, value) pairs in key order.
Labels = tuple[tuple[str, str], ...]


class NodeTally:
    """Per list (one per label selector, in `lists` order), each Node's `class_labels`; and
    how many Nodes carry each distinct value. A Node in several lists counts once, with the
    value of the last list that holds it, as merging the lists in order as dicts would."""

    def __init__(self, lists: Sequence[str]):
        self._held: dict[str, dict[str, Labels]] = {key: {} for key in lists}
        # Nodes per distinct value of the merged lists: its keys are the distinct values.
        self._counts: dict[Labels, int] = {}
        # One tuple per value held anywhere, shared by every Node that carries it, and how
        # many holdings use it: 15,000 alike Nodes hold one tuple, not 15,000 copies.
        self._shared: dict[Labels, tuple[Labels, int]] = {}

    def replace(self, key: str, nodes: Iterable[tuple[str, Mapping[str, str]]]) -> bool:
        """The list `key` holds exactly `nodes` (name, labels), as a fresh list says; True
        when a distinct value appeared or went."""
        listed = {name: class_labels(labels) for name, labels in nodes}
        changed = False
        for name in [n for n in self._held[key] if n not in listed]:
            changed |= self._set(key, name, None)
        for name, value in listed.items():
            changed |= self._set(key, name, value)
        return changed

    def put(self, key: str, name: str, labels: Mapping[str, str]) -> bool:
        """A Node added to or modified in list `key`; True when a distinct value appeared or
        went."""
        return self._set(key, name, class_labels(labels))

    def drop(self, key: str, name: str) -> bool:
        """A Node gone from list `key`; True when a distinct value went."""
        return self._set(key, name, None)

    def distinct(self) -> dict[str, dict[str, str]]:
        """One labels map per distinct value, keyed by a made-up name, as
        `profiles_from_labels` takes them."""
        return {str(i): dict(value) for i, value in enumerate(self._counts)}

    def _merged(self, name: str) -> Labels | None:
        return next((held[name] for held in reversed(self._held.values()) if name in held), None)

    def _set(self, key: str, name: str, value: Labels | None) -> bool:
        before = self._merged(name)
        held = self._held[key]
        if (old := held.pop(name, None)) is not None:
            self._release(old)
        if value is not None:
            held[name] = self._share(value)
        after = self._merged(name)
        if before == after:
            return False
        changed = False
        if before is not None:
            self._counts[before] -= 1
            if not self._counts[before]:
                del self._counts[before]
                changed = True
        if after is not None:
            changed |= after not in self._counts
            self._counts[after] = self._counts.get(after, 0) + 1
        return changed

    def _share(self, value: Labels) -> Labels:
        shared, uses = self._shared.get(value, (value, 0))
        self._shared[shared] = (shared, uses + 1)
        return shared

    def _release(self, value: Labels) -> None:
        shared, uses = self._shared[value]
        if uses > 1:
            self._shared[shared] = (shared, uses - 1)
        else:
            del self._shared[shared]
