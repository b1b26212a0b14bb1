"""A test double of `webhook.kube.inventory.NodeInventory` at its reading boundary.

`Discovery` (webhook/server/discovered.py) reads an inventory through `profiles()` (a snapshot
tuple, replaced as a whole when Nodes change), `age_seconds()` and `stop()`; `FakeInventory`
answers those from a snapshot the test sets, without a Kubernetes client.
"""

from __future__ import annotations


class FakeInventory:
    """Stands in for NodeInventory at its reading boundary: a snapshot tuple and an age."""

    def __init__(self, profiles: tuple) -> None:
        self.snapshot = profiles

    def profiles(self) -> tuple:
        """The current snapshot; a test replaces it by assigning ``snapshot``."""
        return self.snapshot

    def age_seconds(self) -> float:
        """A fixed age, so the reported gauge can be checked exactly."""
        return 1.5

    def stop(self) -> None:
        """Stop following: nothing is discovered any more."""
        self.snapshot = ()
