"""Faults under load: `python -m tools.reliability.faults [FAULT...] [--out FILE]`.

Starts `webhook serve` (2 gthread workers, real TLS, loopback) once per fault, drives it
with `load.Load`, strikes, and prints one table row per fault: reviews, failed reviews by
kind, how many of those were in flight when the fault struck, how long reviews kept
failing, the recovery time and whether the master kept its pid; the load average before
and after. The rows and every failure's error go to `bench-results/reliability-faults.json`
(git-ignored).

The worker faults (SIGKILL, out of memory, hung, TLS files bad while workers restart) are
in `worker_faults.py`; here:

(e) Policy file edited, then corrupted, truncated, emptied, deleted and restored: zero
    failures, and every answer comes from the last good policy. Recovery: restore -> both
    workers reloaded. The reload failures must show in /metrics.
(f) Certificates rotated four times (two `..data` swaps by kubelet's own AtomicWriter, two
    file-by-file swaps), each a new CA from `certs.generate(force=True)`: zero failed
    handshakes. Recovery: the slowest rotation's swap -> the first handshake that presents
    the new certificate. Needs the built Kubernetes binaries (`make cluster`).
(g) SIGTERM to the master while slow requests are in flight: every in-flight review ends
    with a 200. Recovery: SIGTERM -> the master exited (the drain).

Every loop is bounded in time and count; nothing leaves loopback.
"""

from __future__ import annotations

import collections
import functools
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.cluster import binaries
from tools.cluster.volumes import install_secret
from tools.loopback.server import install_file_by_file, make_certs, serving
from tools.paths import REPO
from tools.reliability import cgroup, watch, worker_faults
from tools.reliability.load import Load, Record
from tools.reliability.policy_steps import policy_steps
from tools.reliability.report import command_line, publish, row, table
from tools.reliability.watch import AFTER, SEED_ANSWER, TIMEOUT_S, WARM_UP
from tools.waiting import wait_for
from webhook import DEFAULT_POLICIES

OUT = REPO / "bench-results" / "reliability-faults.json"


def first_served(records: list[Record], since: float, cert: bytes) -> Record | None:
    """The first request started after `since` that was served the certificate `cert`."""
    return next((r for r in records if r.start > since and r.cert == cert), None)


def all_serving(records: list[Record], cert: bytes) -> bool:
    """True once the last 20 handshakes in a row were served the certificate `cert`."""
    return [r.cert for r in records if r.cert][-20:] == [cert] * 20


def policy_faults(work: Path) -> dict[str, Any]:
    """(e) Edit, corrupt, truncate, empty, delete and restore the policy file under load."""
    live = work / "policies" / "default.yaml"
    live.parent.mkdir()
    shutil.copy(DEFAULT_POLICIES, live)
    with (
        serving(work, live, workers=2, threads=4) as server,
        Load(server.port, [server.ca], keepalive=4, slow=2) as load,
    ):
        load.wait_requests(WARM_UP)
        # (time, profiles a correct answer may name from then on)
        accepted: list[tuple[float, set[str]]] = [(0.0, {"GRID-P4-2Q"})]
        failures0 = watch.counter(server, "lwgpu_policy_reload_failures_total")
        steps: list[dict[str, Any]] = []
        for step in policy_steps(live):
            done = time.monotonic()
            before = watch.counter(server, step.metric)
            step.apply()
            if step.profile:  # a valid edit: either class until both workers reloaded
                accepted.append((done, accepted[-1][1] | {step.profile}))
            wait_for(
                functools.partial(watch.counted, server, step.metric, before + 2),
                TIMEOUT_S,
                what=f"both workers to see the {step.name} policy",
            )
            took = time.monotonic() - done
            if step.profile:
                accepted.append((time.monotonic(), {step.profile}))
            steps.append({"step": step.name, "seen_by_both_workers_s": round(took, 3)})
            load.wait_requests(200)
        failures = watch.counter(server, "lwgpu_policy_reload_failures_total") - failures0
        load.wait_requests(AFTER)
        state = watch.master(server)

    def ok(record: Record) -> bool:
        # The classes accepted when the request started, and any accepted while it ran.
        allowed = next(p for t, p in reversed(accepted) if t <= record.start)
        allowed = allowed.union(*(p for t, p in accepted if record.start < t <= record.end))
        return record.status == 200 and record.profile in allowed

    profiles = collections.Counter(str(r.profile) for r in load.records)
    return row(
        "policy edit/corrupt/truncate/empty/delete/restore",
        load.records,
        [],
        steps[-1]["seen_by_both_workers_s"],
        ok,
        master=state,
        steps=steps,
        profiles=profiles,
        note=f"/metrics counted {failures:.0f} failed reloads (4 bad states x 2 workers); "
        f"answers stayed on the last good policy",
    )


def rotate_certificates(work: Path) -> dict[str, Any]:
    """(f) Swap in four new certificate sets (each with a new CA) under load."""
    sets = [make_certs(work / "sets" / f"v{i}", force=True) for i in range(1, 6)]
    live = work / "live"
    install_secret(live, sets[0])
    cas = [s / "ca.crt" for s in sets]
    with (
        serving(work, DEFAULT_POLICIES, live, workers=2, threads=4, ca=cas[0]) as server,
        Load(server.port, cas, keepalive=1, fresh=6) as load,
    ):
        load.wait_requests(WARM_UP)
        struck, recoveries = [], []
        for version, cert_set in enumerate(sets[1:], start=2):
            new = _der(cert_set)
            swapped = time.monotonic()
            struck.append(swapped)
            if version <= 3:
                install_secret(live, cert_set)
            else:
                install_file_by_file(live, cert_set, f"v{version}")
            first = wait_for(
                functools.partial(first_served, load.records, swapped, new),
                TIMEOUT_S,
                what=f"certificate v{version} served",
            )
            recoveries.append(first.end - swapped)
            # Both workers switched once 20 handshakes in a row got the new certificate.
            wait_for(
                functools.partial(all_serving, load.records, new),
                TIMEOUT_S,
                what=f"every worker serving v{version}",
            )
        load.wait_requests(AFTER)
        state = watch.master(server)
    handshakes = sum(r.handshake for r in load.records)
    return row(
        "rotate certificates x4",
        load.records,
        struck,
        max(recoveries),
        SEED_ANSWER,
        master=state,
        handshakes=handshakes,
        note=f"{handshakes} TLS handshakes; new certificate first served after "
        + ", ".join(f"{s:.2f}" for s in recoveries)
        + " s",
    )


def _der(cert_set: Path) -> bytes:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate((cert_set / "tls.crt").read_bytes()).public_bytes(
        Encoding.DER
    )


def terminate_master(work: Path) -> dict[str, Any]:
    """(g) SIGTERM the gunicorn master while slow requests are in flight."""
    with (
        serving(work, DEFAULT_POLICIES, workers=2, threads=4) as server,
        Load(server.port, [server.ca], keepalive=4, slow=4, pause=0.5) as load,
    ):
        # Slow clients spend most of each request paused mid-body: some are always in flight.
        load.wait_requests(WARM_UP)
        struck = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        code = server.process.wait(TIMEOUT_S)
        drained = time.monotonic() - struck
    in_flight = [r for r in load.records if r.in_flight(struck)]
    after = [r for r in load.records if r.start > struck]
    result = row(
        "SIGTERM the master",
        [r for r in load.records if r.start <= struck],
        [struck],
        drained,
        SEED_ANSWER,
        master=f"exited {code}",
        exit_code=code,
        in_flight=len(in_flight),
        note=f"{len(in_flight)} reviews in flight at SIGTERM; exit {code}; "
        f"{sum(r.status is None for r in after)} of {len(after)} requests sent "
        f"after it were refused (new connections to a stopping server)",
    )
    return result


FAULTS = {
    **worker_faults.FAULTS,
    "policy": policy_faults,
    "rotate-certs": rotate_certificates,
    "sigterm": terminate_master,
}


def unmet(faults: list[str]) -> str | None:
    """What the faults named need and this machine lacks (None: nothing): said before any
    fault runs, not when the third one reaches install_secret."""
    if "oom-worker" in faults and (why := cgroup.available()):
        return f"oom-worker runs the server in a memory cgroup, and {why}"
    if "rotate-certs" in faults and (absent := binaries.missing()):
        return (
            f"rotate-certs writes the Secret volume with kubelet's AtomicWriter, and "
            f"{', '.join(absent)} not built; {binaries.HOW_TO_BUILD}"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the chosen faults (all by default), print the table, write the JSON."""
    parser, faults, out = command_line(
        "python -m tools.reliability.faults",
        __doc__.split("\n\n")[0],
        "fault",
        list(FAULTS),
        OUT,
        argv,
    )
    if why := unmet(faults):
        parser.error(why)
    before = os.getloadavg()
    rows = run(faults)
    publish(table(rows), rows, before, out)
    return 0


def run(faults: list[str]) -> list[dict[str, Any]]:
    """The rows of the faults named, in that order, each on a server of its own."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="lwgpu-faults-") as scratch:
        for name in faults:
            work = Path(scratch) / name
            work.mkdir()
            print(f"fault {name} ...", file=sys.stderr, flush=True)
            rows.append(FAULTS[name](work))
    return rows


if __name__ == "__main__":
    sys.exit(main())
