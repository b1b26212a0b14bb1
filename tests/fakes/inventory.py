"""A test double of `webhook.kube.inventory.NodeInventory` at its reading boundary.

`Discovery` (webhook/server/state/discovery.py) reads an inventory through `profiles()` (a snapshot
tuple, replaced as a whole when Nodes change), `age_seconds()` and `stop()`; `FakeInventory`
answers those from a snapshot the test sets, without a Kubernetes client. Like NodeInventory,
`stop()` ends the following but keeps the last snapshot, and `running()` says which it is.
tests/kube/test_fake_inventory.py holds it to the real NodeInventory, on the real apiserver.
"""

from __future__ import annotations


class FakeInventory:
    """Stands in for NodeInventory at its reading boundary: a snapshot tuple and an age."""

    def __init__(self, profiles: tuple) -> None:
        self.snapshot = profiles
        self.following = True

    def profiles(self) -> tuple:
        """The current snapshot; a test replaces it by assigning ``snapshot``."""
        return self.snapshot

    def age_seconds(self) -> float:
        """A fixed age, so the reported gauge can be checked exactly."""
        return 1.5

    def running(self) -> bool:
        """True until ``stop``."""
        return self.following

    def stop(self, timeout: float = 5.0) -> None:
        """Stop following; the last snapshot stays, as NodeInventory's does."""
        self.following = False
