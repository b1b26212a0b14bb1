"""The hostile-network attack suite: `python -m tools.reliability.attacks [ATTACK ...]`.

Starts `webhook serve` as deploy/ runs it (2 workers x 8 threads, stdout a pipe shared by
the workers) on loopback, then for each attack: holds the attack while three clients send
legitimate reviews (a fresh TLS connection, POST /mutate of the seed pod, 5 s timeout,
as the apiserver with `timeoutSeconds: 5` would), samples the PSS of master + workers every
0.1 s, and after the attack ends measures how long until a review succeeds again. Prints a
Markdown table (the one in docs/RELIABILITY.md) and writes every number to
bench-results/reliability-attacks.json. Every loop is bounded; nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

from tools.bench import bodies, procs
from tools.loopback.server import make_certs
from tools.paths import REPO
from tools.reliability.payloads import (
    dense_review,
    hostile_names,
    init_containers_pod,
    update_review,
)
from tools.reliability.stalls import KINDS, Stalls

HOLD_S = 8.0  # how long each attack is held while legitimate reviews run
CLIENTS, PACE_S = 3, 0.2  # legitimate clients, each sending a review every 0.2 s
TIMEOUT_S = 5.0  # the webhook's timeoutSeconds in deploy/
HELD = 256
OUT = REPO / "bench-results" / "reliability-attacks.json"
SEED = bodies.body(bodies.seed_pod())


def post(server: procs.Server, body: bytes, timeout: float = TIMEOUT_S) -> tuple[int, bytes]:
    """POST /mutate on a fresh verified TLS connection; (status, body), or (0, error text)."""
    context = ssl.create_default_context(cafile=str(server.ca))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=timeout)
    try:
        conn.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as exc:
        return 0, type(exc).__name__.encode()
    finally:
        conn.close()


class Sampler(threading.Thread):
    """The peak PSS of the server's processes while it runs."""

    def __init__(self, master: int) -> None:
        super().__init__(daemon=True)
        self.master, self.peak = master, 0.0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            self.peak = max(self.peak, procs.memory(self.master)["pss_mib"])


def legitimate(server: procs.Server, seconds: float) -> list[tuple[float, int]]:
    """(latency, status) of each review the legitimate clients sent for `seconds`."""
    end = time.monotonic() + seconds

    def client() -> list[tuple[float, int]]:
        seen = []
        while time.monotonic() < end:
            start = time.monotonic()
            status, _ = post(server, SEED)
            seen.append((time.monotonic() - start, status))
            time.sleep(max(0.0, PACE_S - (time.monotonic() - start)))
        return seen

    with ThreadPoolExecutor(CLIENTS) as pool:
        return [r for seen in pool.map(lambda _: client(), range(CLIENTS)) for r in seen]


def recovery(server: procs.Server, limit: float = 60.0) -> float:
    """Seconds from now until a legitimate review is answered 200 within the timeout."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if post(server, SEED)[0] == 200:
            return time.monotonic() - start
        time.sleep(0.05)
    return float("inf")


@contextmanager
def stalls(server: procs.Server, kind: str) -> Iterator[dict[str, Any]]:
    attacker = Stalls(server.port, server.ca, kind, HELD)
    attacker.start()
    attacker.held.wait(60)
    facts: dict[str, Any] = {}
    try:
        yield facts
    finally:
        attacker.stop()
        facts.update(
            opened=attacker.opened, closed_by_server=attacker.closed_by_server,
            answers=attacker.answers, refused=attacker.refused,
        )  # fmt: skip


@contextmanager
def connect_flood(server: procs.Server) -> Iterator[dict[str, Any]]:
    """300 TCP connects in 0.3 s that never send a byte, held open."""
    held = []
    for _ in range(300):
        held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        time.sleep(0.001)
    try:
        yield {"connections": len(held)}
    finally:
        for sock in held:
            sock.close()


@contextmanager
def repeated(server: procs.Server, body: bytes, concurrent: int) -> Iterator[dict[str, Any]]:
    """`concurrent` clients sending `body` again and again while the attack is held."""
    stop = threading.Event()
    seen: list[tuple[float, int, int]] = []

    def client() -> None:
        while not stop.is_set():
            start = time.monotonic()
            status, data = post(server, body, timeout=30)
            seen.append((time.monotonic() - start, status, len(data)))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrent)]
    for thread in threads:
        thread.start()
    facts: dict[str, Any] = {"body_mib": round(len(body) / 2**20, 2), "concurrent": concurrent}
    try:
        yield facts
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        facts.update(
            sent=len(seen),
            statuses=sorted({s for _, s, _ in seen}),
            slowest_s=round(max((t for t, _, _ in seen), default=0.0), 3),
            largest_answer_mib=round(max((n for _, _, n in seen), default=0) / 2**20, 2),
        )


ATTACKS: dict[str, Callable[[procs.Server], object]] = {
    **{f"{HELD} x {kind}": functools.partial(stalls, kind=kind) for kind in KINDS},
    "300 TCP connects in 0.3 s": connect_flood,
    "8 concurrent 7 MiB reviews": lambda s: repeated(
        s, bodies.body(bodies.pod_near_limit(7 * 2**20 - 4096)), 8
    ),
    "8 concurrent 7 MiB reviews of empty containers": lambda s: repeated(s, dense_review(), 8),
    "2 concurrent 6.5 MiB UPDATEs": lambda s: repeated(
        s, update_review(bodies.pod_near_limit(int(3.25 * 2**20))), 2
    ),
    "2 concurrent pods of 40k GPU init containers": lambda s: repeated(
        s, bodies.body(init_containers_pod()), 2
    ),
    "6 MiB of uid, name and namespace": lambda s: repeated(s, hostile_names(), 2),
}


def server_errors(server: procs.Server) -> int:
    """5xx answers the server counted (lwgpu_admission_request_errors_total, code 5xx)."""
    status, data = server.get("/metrics")
    assert status == 200, data
    return int(
        sum(
            sample.value
            for family in text_string_to_metric_families(data.decode())
            for sample in family.samples
            if sample.name == "lwgpu_admission_request_errors_total"
            and sample.labels["code"].startswith("5")
        )
    )


def attack(server: procs.Server, name: str) -> dict[str, Any]:
    """One row: the attack held while legitimate reviews run, then the recovery."""
    errors_before = server_errors(server)
    sampler = Sampler(server.process.pid)
    sampler.start()
    with ATTACKS[name](server) as facts:  # type: ignore[attr-defined]
        seen = legitimate(server, HOLD_S)
    sampler.done.set()
    sampler.join()
    took = recovery(server)
    answered = [t for t, status in seen if status == 200 and t <= TIMEOUT_S]
    return {
        "attack": name,
        "reviews": len(seen),
        "answered_in_5s": len(answered),
        "answered_pct": round(100 * len(answered) / max(1, len(seen)), 1),
        "slowest_s": round(max((t for t, _ in seen), default=0.0), 3),
        "pss_peak_mib": round(sampler.peak, 1),
        "server_5xx": server_errors(server) - errors_before,
        "client_5xx": sum(1 for _, status in seen if status >= 500),
        "recovery_s": round(took, 3),
        "attack_facts": facts,
    }


def access_lines(path: Path) -> dict[str, Any]:
    """How the per-review lines on the server's stdout pipe came out."""
    lines = path.read_bytes().splitlines()
    invalid = 0
    for line in lines:
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            invalid += 1
    return {
        "lines": len(lines),
        "invalid_json": invalid,
        "longest": max(map(len, lines), default=0),
    }


COLUMNS = (
    ("attack", "attack"),
    ("reviews", "legitimate reviews"),
    ("answered_pct", "answered in 5 s (%)"),
    ("slowest_s", "slowest (s)"),
    ("pss_peak_mib", "PSS peak (MiB)"),
    ("server_5xx", "5xx"),
    ("recovery_s", "recovery (s)"),
)


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as the Markdown table docs/RELIABILITY.md shows."""
    out = ["| " + " | ".join(title for _, title in COLUMNS) + " |"]
    out.append("|---|" + "---:|" * (len(COLUMNS) - 1))
    out += ["| " + " | ".join(str(row[key]) for key, _ in COLUMNS) + " |" for row in rows]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen attacks (all by default) against one server; print and save the table."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.reliability.attacks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("attacks", nargs="*", metavar="ATTACK", help="attack names (default all)")
    parser.add_argument("--out", type=Path, default=OUT, help="JSON file (default %(default)s)")
    parser.add_argument(
        "--fail-under",
        type=float,
        metavar="PCT",
        help="exit 1 when an attack leaves fewer than PCT%% of legitimate reviews answered in "
        "5 s, or causes a 5xx (what CI runs: `make attacks-fast`)",
    )
    args = parser.parse_args(argv)
    unknown = [a for a in args.attacks if a not in ATTACKS]
    if unknown:
        parser.error(f"unknown attack {unknown[0]!r}; choose from: {', '.join(ATTACKS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="lwgpu-attacks-") as scratch:
        work = Path(scratch)
        tls = make_certs(work / "tls")
        serve = ["serve", "--tls-dir", str(tls), "--workers", "2", "--threads", "8"]
        with procs.serving("webhook", "webhook", serve, tls / "ca.crt", work, piped=True) as server:
            idle = procs.memory(server.process.pid)["pss_mib"]
            for name in args.attacks or list(ATTACKS):
                print(f"attack {name} ...", file=sys.stderr, flush=True)
                rows.append(attack(server, name))
        log = access_lines(work / "webhook.stdout")
    print(table(rows))
    print(f"\nidle PSS {idle} MiB; access log on a pipe: {log}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"idle_pss_mib": idle, "log": log, "rows": rows}, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    failed = [
        row["attack"]
        for row in rows
        if args.fail_under is not None
        and (row["answered_pct"] < args.fail_under or row["server_5xx"] or row["client_5xx"])
    ]
    if failed:
        print(f"below {args.fail_under}% answered, or a 5xx: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
