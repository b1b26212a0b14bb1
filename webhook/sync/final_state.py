"""The apiserver's final-state check kept equal to the served policy, load after load.

`FinalStateSync.step` polls the policy path as the webhook server does (`PolicyStore`: a
changed fingerprint, then a load; a load that fails keeps the last good policy), compiles each
good load into the ValidatingAdmissionPolicy and its binding, and applies them when they
differ from those last applied. A policy that discovers its classes from the Nodes is
followed as the server follows it (`Discovery`: a node inventory started on the first such
load) and compiled again whenever the classes found change. What the apiserver enforces only
ever moves to a policy that loaded and compiled:

- a load that fails, or a policy the check cannot express (one that discovers, until the
  first list of Nodes), keeps the last applied objects (logged once: each load, and each
  snapshot of the Nodes, is its own cause);
- an API failure (unreachable, 404 for a deleted object, 422) is retried with backoff,
  doubling up to a bound, and logged once per cause; the retries in between are debug lines;
- every `resync_s` the wanted objects are applied again: a no-op when nobody changed them, and
  a repair (logged) when another writer did, as `helm upgrade` or `kubectl apply` of the
  install put back the objects compiled from the shipped policy.

Stopping the sidecar (or the whole webhook) changes nothing in the apiserver: the last
applied check stays in force.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from webhook.compile import Unexpressible, final_state_check
from webhook.kube.admission_policies import PatchError
from webhook.policy import Profile
from webhook.server.state.discovery import Discovery
from webhook.server.state.policy_store import POLL_INTERVAL, PolicyStore

log = logging.getLogger(__name__)

Objects = list[dict[str, Any]]
# Writes objects in order and returns `kind/name` -> stored `metadata.generation`.
Applier = Callable[[Sequence[dict[str, Any]]], dict[str, int]]
BACKOFF_S = (0.5, 30.0)
RESYNC_S = 60.0


class FinalStateSync:
    """Follows one policy path and keeps the apiserver's final-state check compiled from it."""

    def __init__(
        self,
        path: str | Path,
        apply: Applier,
        *,
        backoff: tuple[float, float] = BACKOFF_S,
        resync_s: float = RESYNC_S,
        discovery: Discovery | None = None,
    ) -> None:
        """`apply` writes objects to the apiserver (`webhook.kube.admission_policies.
        patch_objects` on a client); `backoff` is (first, max) seconds between failed
        attempts; `discovery` follows the Nodes for a policy that discovers (by default as
        the server's does)."""
        self.store = PolicyStore(path, on_failed=self._load_failed)
        self.discovery = discovery or Discovery()
        self._apply = apply
        self._backoff, self._resync_s = backoff, resync_s
        self.wanted: Objects | None = None  # compiled from the last good load
        self.applied: Objects | None = None  # what the apiserver last took from us
        self.generations: dict[str, int] = {}  # as stored after that
        self._wanted_from = 0  # the policy generation `wanted` was compiled from
        self._classes: tuple[Profile, ...] | None = None  # and the discovered classes
        self._applied_from = 0  # and `applied`
        self._due = 0.0  # monotonic time of the next attempt
        self._delay = backoff[0]
        self._failing: str | None = None  # the API failure last logged

    def step(self, now: float) -> None:
        """Reload if the files changed; apply the wanted objects if they are due."""
        if self.store.poll():
            self.discovery.follow(self.store.current)
            self._compile()
        elif self._discovered() != self._classes:
            self._compile()
        if self.wanted is None or now < self._due:
            return
        resync = self.wanted == self.applied
        try:
            generations = self._apply(self.wanted)
        except PatchError as err:
            self._apply_failed(str(err), now)
            return
        self._took(generations, resync, now)

    def run(self, stop: threading.Event, interval: float = POLL_INTERVAL) -> None:
        """Step every `interval` seconds until `stop` is set."""
        while True:
            try:
                self.step(time.monotonic())
            except Exception:  # the sidecar must outlive any surprise, as the poller does
                log.exception("final-state sync step failed")
            if stop.wait(interval):
                return

    def _discovered(self) -> tuple[Profile, ...] | None:
        """The classes found on the Nodes, for a policy that discovers; None before the first
        list (or without such a policy)."""
        inventory = self.discovery.inventory
        if inventory is None or not inventory.wait_synced(0):
            return None
        classes: tuple[Profile, ...] = inventory.profiles()
        return classes

    def _compile(self) -> None:
        generation, policies = self.store.generation, self.store.current
        # Nodes are followed only once a loaded policy discovers: a policy is there.
        assert policies is not None, "compiled before any policy loaded"
        self._classes = self._discovered()
        try:
            wanted = final_state_check(policies, self._classes)
        except Unexpressible as err:
            log.error(
                "policy generation %d cannot be checked in the apiserver (%s); %s",
                generation,
                err,
                self._kept(),
            )
            return
        self.wanted, self._wanted_from, self._due = wanted, generation, 0.0

    def _load_failed(self, message: str) -> None:
        # PolicyStore has logged the error itself; this line says what it means here.
        log.warning("the policy did not load; %s", self._kept())

    def _kept(self) -> str:
        if self.applied is None:
            return "the apiserver keeps the check it has (none applied by this sidecar yet)"
        return f"the apiserver keeps the check applied from policy generation {self._applied_from}"

    def _apply_failed(self, cause: str, now: float) -> None:
        self._due = now + self._delay
        if cause == self._failing:
            log.debug("still cannot apply (%s); retrying in %.1fs", cause, self._delay)
        else:
            self._failing = cause
            log.warning(
                "cannot apply the final-state check of policy generation %d: %s; %s; "
                "retrying in %.1fs",
                self._wanted_from,
                cause,
                self._kept(),
                self._delay,
            )
        self._delay = min(self._delay * 2, self._backoff[1])

    def _took(self, generations: dict[str, int], resync: bool, now: float) -> None:
        stored = ", ".join(f"{name} (generation {g})" for name, g in generations.items())
        if self._failing is not None:
            log.info("the API server takes the check again")
        if not resync:
            found = "" if self._classes is None else f" and {len(self._classes)} classes found"
            log.info(
                "applied the final-state check of policy generation %d%s: %s",
                self._wanted_from,
                found,
                stored,
            )
        elif generations != self.generations:
            log.warning("another writer had changed the final-state check; re-applied: %s", stored)
        self.applied, self._applied_from = self.wanted, self._wanted_from
        self.generations = generations
        self._failing, self._delay = None, self._backoff[0]
        self._due = now + self._resync_s
