"""The worker faults of `python -m tools.reliability.faults`, each under a steady load of reviews.

(a) kill-worker: SIGKILL one of the two workers; gunicorn forks a replacement.
(b) oom-worker: the server runs in a memory cgroup (`cgroup.py`) and one review of a pod of
    40k GPU init containers takes a worker past the limit; the kernel's OOM killer SIGKILLs it.
    The limit is the Deployment's memory request, 128 MiB, not its 384 MiB limit: the server
    is built to stay under 384 MiB (docs/RELIABILITY.md, *Hostile network*), so a worker
    reaches a limit only when it is lower than the server needs, as here, or by a leak.
(c) hung-worker: SIGSTOP one worker, as a worker stuck with the GIL held or its event loop
    blocked looks from outside: it stops beating gunicorn's heartbeat, while its listener
    (SO_REUSEPORT) still receives its share of new connections. gunicorn's `timeout` makes the
    master kill it. A thread stuck inside one review is not this fault: the loop beats on, the
    timeout never fires, and the worker serves on with one thread fewer.
(d) tls-restart: both workers are killed in turn while the key is missing, then half-written,
    then of another pair; then the files are made whole again.

Each row counts the reviews that failed and how, how long reviews kept failing after the
fault, the recovery (fault -> the replacement worker has loaded the policy and serves), and
whether the master kept its pid throughout.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.bench import bodies
from tools.loopback.server import Server, install_file_by_file, make_certs, serving
from tools.reliability import payloads, procfs, watch
from tools.reliability.cgroup import Cgroup
from tools.reliability.load import HEADERS, Load, connect
from tools.reliability.report import row
from tools.reliability.watch import AFTER, SEED_ANSWER, TIMEOUT_S, WARM_UP
from webhook import DEFAULT_POLICIES
from webhook.server.master import WORKER_TIMEOUT_SECONDS

MEMORY_LIMIT = 128 * 2**20  # the Deployment's memory request (deploy/base/webhook.yaml)


def kill_worker(work: Path) -> dict[str, Any]:
    """(a) SIGKILL one of the two workers under load."""
    return _strike(work, "SIGKILL one worker", lambda victim: os.kill(victim, signal.SIGKILL))


def hung_worker(work: Path) -> dict[str, Any]:
    """(c) SIGSTOP one worker under load; gunicorn's timeout must replace it."""
    return _strike(
        work,
        f"SIGSTOP one worker (gunicorn timeout {WORKER_TIMEOUT_SECONDS} s)",
        lambda victim: os.kill(victim, signal.SIGSTOP),
        wait_s=WORKER_TIMEOUT_SECONDS + TIMEOUT_S,
    )


def _strike(
    work: Path, fault: str, strike: Callable[[int], None], wait_s: float = TIMEOUT_S
) -> dict[str, Any]:
    with (
        serving(work, DEFAULT_POLICIES, workers=2, threads=4) as server,
        Load(server.port, [server.ca], keepalive=4, fresh=2, slow=2, max_seconds=180) as load,
    ):
        load.wait_requests(WARM_UP)
        workers = procfs.children(server.process.pid)
        loads = watch.counter(server, watch.RELOADS)
        victim = min(workers)
        struck = time.monotonic()
        strike(victim)
        try:
            new = watch.replaced(server, workers, wait_s)
        finally:  # a stopped worker never replaced would hold the server's stop for 30 s
            if procfs.alive(victim):
                os.kill(victim, signal.SIGKILL)
        recovery = watch.booted(server, loads, struck, TIMEOUT_S)
        load.wait_requests(AFTER)
        state = watch.master(server)
    return row(
        fault,
        load.records,
        [struck],
        recovery,
        SEED_ANSWER,
        master=state,
        note=f"worker {victim} replaced by {sorted(new)}",
    )


def oom_worker(work: Path) -> dict[str, Any]:
    """(b) A worker past the cgroup's memory limit under load: the kernel kills it."""
    heavy = bodies.body(payloads.init_containers_pod())
    with (
        Cgroup(f"lwgpu-faults-{os.getpid()}", MEMORY_LIMIT) as cgroup,
        serving(
            work,
            DEFAULT_POLICIES,
            workers=2,
            threads=4,
            launcher=cgroup.launcher(sys.executable, "-m", "webhook"),
        ) as server,
        Load(server.port, [server.ca], keepalive=4, fresh=2, slow=2, max_seconds=180) as load,
    ):
        load.wait_requests(WARM_UP)
        workers = procfs.children(server.process.pid)
        loads = watch.counter(server, watch.RELOADS)
        # One heavy review at a time, until one has taken a worker over the limit (one
        # review answered without that means the server stayed under it: send another).
        sent = 0
        while not cgroup.oom_kills() and sent < 5:
            # The fault strikes as the fatal review starts: the worker grows, the kernel
            # reclaims, the worker stalls, then it is killed.
            struck = time.monotonic()
            _post(server, heavy)
            sent += 1
        killed = watch.gone(workers, TIMEOUT_S)
        new = watch.replaced(server, workers, TIMEOUT_S)
        recovery = watch.booted(server, loads, struck, TIMEOUT_S)
        load.wait_requests(AFTER)
        state, kills = watch.master(server), cgroup.oom_kills()
    return row(
        f"one worker over a {MEMORY_LIMIT >> 20} MiB memory limit",
        load.records,
        [struck],
        recovery,
        SEED_ANSWER,
        master=state,
        oom_kills=kills,
        note=f"{kills} OOM kill after {sent} review(s) of 40k GPU init containers; "
        f"worker {sorted(killed)} replaced by {sorted(new)}",
    )


def _post(server: Server, body: bytes) -> None:
    conn = connect(server.port, server.ca, timeout=30)
    try:
        conn.call("POST", "/mutate", body, HEADERS)
    except OSError:
        pass  # the worker reviewing it was killed: the fault itself, not the load's
    finally:
        conn.close()


def _break(live: Path, how: str, other: Path) -> None:
    key = live / "tls.key"
    if how == "missing":
        key.unlink()
    elif how == "half-written":
        key.write_bytes(key.read_bytes()[: key.stat().st_size // 2])
    else:  # another pair's key under this certificate
        shutil.copy(other / "tls.key", key)


def tls_restart(work: Path) -> dict[str, Any]:
    """(d) Both workers killed in turn while the key is missing, half-written, mismatched."""
    good, other = make_certs(work / "good"), make_certs(work / "other")
    live = work / "live"
    install_file_by_file(live, good, "v1")
    struck: list[float] = []
    recoveries: list[float] = []
    with (
        serving(work, DEFAULT_POLICIES, live, workers=2, threads=4) as server,
        Load(server.port, [server.ca], keepalive=2, fresh=6, max_seconds=180) as load,
    ):
        load.wait_requests(WARM_UP)
        for how in ("missing", "half-written", "mismatched"):
            _break(live, how, other)
            for _ in range(2):  # each of the two workers, one after the other
                workers = procfs.children(server.process.pid)
                loads = watch.counter(server, watch.RELOADS)
                struck.append(time.monotonic())
                os.kill(min(workers), signal.SIGKILL)
                watch.replaced(server, workers, TIMEOUT_S)
                recoveries.append(watch.booted(server, loads, struck[-1], TIMEOUT_S))
                load.wait_requests(100)
            install_file_by_file(live, good, how)
        load.wait_requests(AFTER)
        state = watch.master(server)
    return row(
        "2 workers killed while the key is missing, half-written, mismatched",
        load.records,
        struck,
        max(recoveries),
        SEED_ANSWER,
        master=state,
        note=f"{len(struck)} kills; each replacement served after "
        + ", ".join(f"{s:.2f}" for s in recoveries)
        + " s",
    )


FAULTS = {
    "kill-worker": kill_worker,
    "oom-worker": oom_worker,
    "hung-worker": hung_worker,
    "tls-restart": tls_restart,
}
