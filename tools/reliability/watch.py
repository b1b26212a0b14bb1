"""What the fault scripts share: their schedule, and what they read of a running server
(/metrics counters, its workers, its master)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from tools.loopback.server import Server
from tools.reliability import procfs
from tools.reliability.load import Record
from tools.waiting import wait_for

RELOADS = "lwgpu_policy_reloads_total"  # each worker counts one policy load as it boots
WARM_UP = 300  # requests before a fault strikes
AFTER = 600  # requests after recovery, to show the server serves again
TIMEOUT_S = 45  # for any one wait; gunicorn's graceful timeout is 30 s


def counter(server: Server, name: str) -> float:
    """A label-less counter of the server's /metrics (0 before its first increment)."""
    return server.metrics().get((name, frozenset()), 0.0)


def counted(server: Server, name: str, at_least: float) -> bool:
    """True once the counter `name` has reached `at_least`."""
    return counter(server, name) >= at_least


def served(expected: str) -> Callable[[Record], bool]:
    """A review answered 200 with the class `expected`."""
    return lambda r: r.status == 200 and r.profile == expected


# What the load's review (the seed pod, 2 GiB of GPU memory) gets from the default policy.
SEED_ANSWER = served("GRID-P4-2Q")


def _changed(server: Server, workers: set[int]) -> set[int]:
    now = procfs.children(server.process.pid)
    return now if len(now) == len(workers) and now != workers else set()


def replaced(server: Server, workers: set[int], timeout: float, interval: float = 0.05) -> set[int]:
    """Wait until one of `workers` has been replaced by a new one; the new workers."""
    now = wait_for(
        functools.partial(_changed, server, workers), timeout, interval, what="a new worker"
    )
    return now - workers


def gone(workers: set[int], timeout: float) -> set[int]:
    """Wait until some of `workers` have exited; those."""
    return wait_for(
        lambda: {pid for pid in workers if not procfs.alive(pid)}, timeout, what="a worker to exit"
    )


def booted(server: Server, loads: float, struck: float, timeout: float) -> float:
    """Wait until the policy loads counted passed `loads` (a new worker is serving); the seconds
    since `struck`."""
    wait_for(
        functools.partial(counted, server, RELOADS, loads + 1),
        timeout,
        what="the new worker's policy load",
    )
    return time.monotonic() - struck


def master(server: Server) -> str:
    """The master as the table shows it: "same pid" while it runs and has workers."""
    code = server.process.poll()
    if code is not None:
        return f"exited {code}"
    return "same pid" if procfs.children(server.process.pid) else "no workers"
