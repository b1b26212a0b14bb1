"""The API server and etcd misbehaving for lwgpu's three API clients: `python -m
tools.reliability.apiserver_faults [FAULT...] [--out FILE]`.

On the real control plane, with discoverProfiles (an inventory and `webhook serve` answering
reviews), `label-node` and `certs install` running as in `apiserver_rig.py`, each fault strikes,
holds, and ends:

- restart: kube-apiserver stopped for `HOLD_S` seconds, then started again on the same
  address and certificates;
- compaction: with the Nodes' watch cache off, etcd compacted past the inventory's
  resourceVersion: its next watch, resumed from there, gets 410 Gone and it lists again;
- throttle: API Priority and Fairness rejects the three accounts with 429 for `HOLD_S`
  (tools/reliability/throttle.py);
- slow: every answer of the apiserver `SLOW_S` seconds late for `HOLD_S` (a delaying proxy:
  the network, imitated);
- stall: no answer at all for `HOLD_S` (the same proxy, holding them).

During the fault (after it, for the restart: nothing can be written while the apiserver is
down) the admin changes what each client follows: the probe Node moves to a new class, the
labelled Node loses its labels, the serving Secret is deleted before the installer runs.
Per fault and client: the staleness (the change until the client shows it: the inventory's
snapshot, a review's answer, the labels back), the error lines logged from the strike on,
the reviews that failed and the slowest one, the recovery (the end of the fault until the
client shows the change), and for `certs install` its exit, its message, whether every
caBundle verifies the serving certificate, and whether a second run completes. The rows go
to `bench-results/reliability-apiserver.json` (git-ignored); `SCENARIOS` and `run(names)` are
what `python -m tools.reliability` runs.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.cluster import binaries
from tools.paths import REPO
from tools.reliability.apiserver_rig import (
    LABELLED,
    LABELS,
    NAMESPACE,
    PROBE,
    REVIEW_EVERY_S,
    Rig,
    rig,
)
from tools.reliability.report import command_line, publish
from tools.reliability.throttle import throttled
from tools.waiting import wait_for

OUT = REPO / "bench-results" / "reliability-apiserver.json"
HOLD_S = 15
SLOW_S = 2.0
CHANGE_AFTER_S = 2  # into the fault: the change is made while it holds
SEEN_TIMEOUT_S = 180
# The labeller's lines that are not failures.
LABELLER_OK = ("labels set", "labels current", "answers again")


def _restart(r: Rig) -> Callable[[], None]:
    # Only the stop runs aside (the apiserver's shutdown takes a while); the start is this
    # thread's: components start with PR_SET_PDEATHSIG, fired when their starting thread ends.
    stopping = threading.Thread(target=r.plane.stop, args=("kube-apiserver",))
    stopping.start()

    def lift() -> None:
        stopping.join(60)
        r.plane.restart_apiserver()

    return lift


def _compaction(r: Rig) -> Callable[[], None]:
    # Two writes outside the clients' selectors, no event for their watches, then the
    # compaction: the inventory's next watch resumes below it.
    r.plane.kubectl("label", "node", LABELLED, "lwgpu-test/bump=1", "--overwrite")
    r.plane.kubectl("label", "node", LABELLED, "lwgpu-test/bump=2", "--overwrite")
    r.plane.compact_etcd()
    return lambda: None


def _throttle(r: Rig) -> Callable[[], None]:
    accounts = [(NAMESPACE, name) for name in ("webhook", "labeller", "installer")]
    throttle = throttled(r.plane, NAMESPACE, accounts, r.kubeconfigs["webhook"].parent)
    throttle.__enter__()

    def lift() -> None:
        throttle.__exit__(None, None, None)

    return lift


def _slow(r: Rig) -> Callable[[], None]:
    r.proxy.delay = SLOW_S

    def lift() -> None:
        r.proxy.delay = 0.0

    return lift


def _stall(r: Rig) -> Callable[[], None]:
    r.proxy.stall()
    return r.proxy.resume


# Each strikes and returns how to end the fault; `holds` says whether it lasts HOLD_S.
FAULTS: dict[str, tuple[str, Callable[[Rig], Callable[[], None]], bool]] = {
    "restart": (f"apiserver stopped {HOLD_S} s, restarted", _restart, True),
    "compaction": ("etcd compacted, Nodes' watch cache off", _compaction, False),
    "throttle": (f"APF 429 for {HOLD_S} s", _throttle, True),
    "slow": (f"answers {SLOW_S:g} s late for {HOLD_S} s (proxy)", _slow, True),
    "stall": (f"no answers for {HOLD_S} s (proxy)", _stall, True),
}
SCENARIOS = list(FAULTS)


def _settle(r: Rig, mem: str) -> None:
    """Move the probe Node to `mem`, restore the labels and the Secret; wait until every
    client shows them (the state each fault starts from)."""
    r.relabel(PROBE, {"aliyun.accelerator/nvidia_mem": mem})
    since = time.monotonic()
    wait_for(lambda: r.discovered(mem) and r.served_since(mem, since), SEEN_TIMEOUT_S, 0.1,
             f"{mem} discovered and served")  # fmt: skip
    wait_for(r.labelled, SEEN_TIMEOUT_S, 0.1, "the labels")
    done = r.install_certs()
    if done.returncode:
        raise RuntimeError(f"certs install before the fault failed: {done.stderr}")


def _seen(check: Callable[[], object]) -> float | None:
    try:
        wait_for(check, SEEN_TIMEOUT_S, 0.05)
    except TimeoutError:
        return None
    return time.monotonic()


def _timed(
    install: Callable[[], subprocess.CompletedProcess[str]],
) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    return install(), time.monotonic() - began


def _change(r: Rig, mem: str) -> float:
    """The admin's changes during a fault: the probe Node to `mem`, the labels gone."""
    changed = time.monotonic()
    r.relabel(PROBE, {"aliyun.accelerator/nvidia_mem": mem})
    r.relabel(LABELLED, dict.fromkeys(LABELS))
    return changed


def fault(r: Rig, name: str, index: int) -> list[dict[str, Any]]:
    """Run one fault; its rows, one per client."""
    label, strike, holds = FAULTS[name]
    new = f"{5184 + 128 * index}MiB"
    if name == "compaction":
        r.plane.restart_apiserver("--watch-cache-sizes=nodes#0")
    _settle(r, f"{5120 + 128 * index}MiB")
    r.core.delete_namespaced_secret("lwgpu-tls", NAMESPACE)
    logs = len(r.inventory_log), len(r.labeller_log)
    struck = time.monotonic()
    with ThreadPoolExecutor(4) as pool:

        def follow(changed: float) -> dict[str, Future[float | None]]:
            return {
                "inventory": pool.submit(_seen, lambda: r.discovered(new)),
                "reviews": pool.submit(_seen, lambda: r.served_since(new, changed)),
                "label-node": pool.submit(_seen, r.labelled),
            }

        lift = strike(r)
        time.sleep(max(0.0, struck + CHANGE_AFTER_S - time.monotonic()))
        installing = pool.submit(_timed, r.install_certs)
        # nothing can be written while the apiserver is down: the restart's change follows it
        if name != "restart":
            changed = _change(r, new)
            seen = follow(changed)
        if holds:
            time.sleep(max(0.0, struck + HOLD_S - time.monotonic()))
        lift()
        ended = time.monotonic()
        if name == "restart":
            changed = _change(r, new)
            seen = follow(changed)
        at = {client: future.result() for client, future in seen.items()}
        certs, certs_s = installing.result()
    rerun = r.install_certs() if certs.returncode else None
    verifies = r.certs_verify()
    reviews = [x for x in r.reviews[:] if x.sent >= struck]
    inventory_log, labeller_log = r.inventory_log[logs[0] :], r.labeller_log[logs[1] :]
    if name == "compaction":  # the watch cache back, for the faults after this one
        r.plane.restart_apiserver()
    inventory_errors = [m for _, lvl, m in inventory_log if lvl >= logging.WARNING]
    labeller_errors = [m for _, m in labeller_log if not any(ok in m for ok in LABELLER_OK)]
    relisted = sum("(410)" in m for _, _, m in inventory_log)
    slowest = max((x.seconds for x in reviews), default=0.0)
    usual = sorted(x.seconds for x in [x for x in r.reviews[:] if x.sent < struck][-200:])
    median = usual[len(usual) // 2] if usual else 0.0

    def row(
        client: str, seen_at: float | None, errors: int, failed: object, note: str
    ) -> dict[str, Any]:
        return {
            "fault": f"{label}: {client}",  # the one table of `python -m tools.reliability`
            "strike": label,
            "client": client,
            "load": f"a review every {REVIEW_EVERY_S * 1000:.0f} ms ({len(reviews)})",
            "errors_logged": errors,
            "failed": failed,
            "staleness_s": None if seen_at is None else round(seen_at - changed, 2),
            "recovery_s": None if seen_at is None else round(max(0.0, seen_at - ended), 2),
            "note": note,
        }

    said = "; ".join(dict.fromkeys(inventory_errors))
    certs_said = f"exit {certs.returncode} after {certs_s:.1f} s"
    if certs.returncode:
        certs_said += (
            f": {certs.stderr.strip()}; the next run: exit {rerun.returncode if rerun else '-'}"
        )
    certs_said += f"; every caBundle verifies the serving certificate: {verifies}"
    certs_row = row("certs install", None, certs.stderr.count("\n"), certs.returncode, certs_said)
    return [
        row("inventory", at["inventory"], len(inventory_errors), "-",
            f"{relisted} watch(es) re-listed after 410" + (f"; {said}" if said else "")),
        row("reviews (serve)", at["reviews"], 0, sum(x.patch is None for x in reviews),
            f"slowest review {slowest * 1000:.0f} ms (median before {median * 1000:.0f} ms)"),
        row("label-node", at["label-node"], len(labeller_errors), "-", "; ".join(labeller_errors)),
        certs_row | {"recovery_s": 0.0, "verifies": verifies},
    ]  # fmt: skip


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as the Markdown table docs/RELIABILITY.md shows."""
    head = (
        "| fault | client | staleness (s) | errors logged | failed | recovery (s) "
        "| note |\n|---|---|---:|---:|---:|---:|---|"
    )

    def number(value: object) -> str:
        return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)

    lines = [
        f"| {r['strike']} | {r['client']} | {number(r['staleness_s'])} | {r['errors_logged']} "
        f"| {r['failed']} "
        f"| {number(r['recovery_s'])} | {r['note']} |"
        for r in rows
    ]
    return "\n".join([head, *lines])


def unmet(names: list[str]) -> str | None:
    """Why the faults cannot run here, or None."""
    absent = binaries.missing()
    return f"not built: {', '.join(absent)}; {binaries.HOW_TO_BUILD}" if absent else None


def run(names: list[str]) -> list[dict[str, Any]]:
    """The rows of the faults named, in that order, on one control plane of their own."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="lwgpu-apiserver-") as scratch, rig(Path(scratch)) as r:
        for index, name in enumerate(names):
            print(f"fault {name} ...", file=sys.stderr, flush=True)
            rows += fault(r, name, index)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the chosen faults (all by default); print the table, write the JSON."""
    parser, names, out = command_line(
        "python -m tools.reliability.apiserver_faults", __doc__.split("\n\n")[0], "fault",
        SCENARIOS, OUT, argv,
    )  # fmt: skip
    if why := unmet(names):
        parser.error(why)
    before = os.getloadavg()
    rows = run(names)
    publish(table(rows), rows, before, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
