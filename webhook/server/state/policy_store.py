"""The policy a worker decides with, reloaded from ``--policies`` while the server runs.

Admins roll policies out through a ConfigMap volume. kubelet updates such a volume by
writing a new hidden directory and swapping the ``..data`` symlink, so the visible
``default.yaml -> ..data/default.yaml`` keeps its name while its target, inode and
contents change. A poller therefore fingerprints what the path resolves to and the bytes
of every policy file (policy files are a few KiB, so reading them once a second costs
nothing) and loads only when that fingerprint moves. A load that fails keeps the last
good ``PolicySet``; requests read ``current`` without a lock (one attribute read).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from webhook.files import load_policies, policy_files
from webhook.policy import PolicyError, PolicySet

log = logging.getLogger(__name__)

POLL_INTERVAL = 1.0


def fingerprint(path: Path) -> bytes:
    """A digest of what ``path`` resolves to and of every policy file's bytes under it."""
    digest = hashlib.sha256(os.path.realpath(path).encode())
    try:
        for file in policy_files(path):
            digest.update(b"\0" + str(file).encode() + b"\0" + file.read_bytes())
    except OSError as exc:
        # A missing or unreadable path is a state of its own: a load is tried (and fails) once.
        digest.update(b"\0error\0" + str(exc).encode())
    return digest.digest()


class PolicyStore:
    """Holds the last good ``PolicySet`` of a path and reloads it when the files change."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        loader: Callable[[Path], PolicySet] = load_policies,
        on_loaded: Callable[[int], None] | None = None,
        on_failed: Callable[[str], None] | None = None,
    ) -> None:
        """Nothing is loaded until ``poll()``; ``on_loaded(generation)`` / ``on_failed(message)``
        are told about each attempt (for metrics)."""
        self.path = Path(path)
        self._loader = loader
        self._on_loaded = on_loaded
        self._on_failed = on_failed
        self._seen: bytes | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.current: PolicySet | None = None
        self.generation = 0
        self.error: str | None = None

    def poll(self) -> bool:
        """Load the policies if the files changed since the last attempt; True when it loaded."""
        with self._lock:
            seen = fingerprint(self.path)
            if seen == self._seen:
                return False
            self._seen = seen
            try:
                policies = self._loader(self.path)
            except PolicyError as exc:
                self._failed("; ".join(exc.errors))
                return False
            except Exception as exc:  # any loader failure must keep the last good policy
                log.exception("policy loader crashed")
                self._failed(f"{type(exc).__name__}: {exc}")
                return False
            self.current, self.error = policies, None
            self.generation += 1
            log.info("policies loaded from %s (generation %d)", self.path, self.generation)
            if self._on_loaded is not None:
                self._on_loaded(self.generation)
            return True

    def _failed(self, message: str) -> None:
        self.error = message
        kept = "keeping the last good policy" if self.current is not None else "no policy loaded"
        log.error("policy reload from %s failed (%s): %s", self.path, kept, message)
        if self._on_failed is not None:
            self._on_failed(message)

    def start(self, interval: float = POLL_INTERVAL) -> threading.Thread:
        """Poll now, then every ``interval`` seconds in a daemon thread until ``stop()``."""
        self.poll()
        thread = threading.Thread(
            target=self._run, args=(interval,), name="policy-poll", daemon=True
        )
        thread.start()
        return thread

    def stop(self) -> None:
        """End the polling thread after its current poll."""
        self._stop.set()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.poll()
            except Exception:  # the poller must outlive any surprise
                log.exception("policy poll failed")
