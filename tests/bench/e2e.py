"""End to end over TLS with keep-alive: `webhook serve` against the no-op floor, and memory.

`wrk` (Debian package `wrk`) drives both servers with the same AdmissionReview
through a Lua script (it POSTs with `Content-Type: application/json`, and
prints its numbers as one JSON line). Both servers run at the same time on the
same certificates; runs alternate between them, so load from elsewhere on the
shared machine hits both alike. Every wrk run is bounded in time, and the
memory runs also in count.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import orjson

import certs

from . import procs

WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = assert(io.open(os.getenv("LWGPU_BENCH_BODY"), "rb"))
wrk.body = file:read("*a")
file:close()

local limit = tonumber(os.getenv("LWGPU_BENCH_LIMIT") or "0")
if limit > 0 then
  local count = 0
  response = function(status, headers, body)
    count = count + 1
    if count >= limit then wrk.thread:stop() end
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'LWGPU_RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"max_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
"""
WRK_SLACK_S = 30
POLL_S = 0.25
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def wrk(
    url: str,
    body: Path,
    script: Path,
    *,
    connections: int,
    duration_s: float,
    limit_per_thread: int = 0,
    until: Callable[[], bool] | None = None,
) -> dict:
    """One wrk run against `url`: requests, throughput, latency percentiles and errors.

    wrk always sleeps out its `-d` duration; when `until()` turns true (polled a few
    times a second) it is interrupted (SIGINT), and then reports as usual.
    """
    threads = min(2, connections)
    env = {**os.environ, "LWGPU_BENCH_BODY": str(body), "LWGPU_BENCH_LIMIT": str(limit_per_thread)}
    command = [
        "wrk",
        "-t",
        str(threads),
        "-c",
        str(connections),
        "-d",
        f"{duration_s:g}s",
        "--timeout",
        "5s",
        "-s",
        str(script),
        url,
    ]
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            deadline = time.monotonic() + duration_s + WRK_SLACK_S
            while process.poll() is None and time.monotonic() < deadline:
                if until is not None and until():
                    process.send_signal(signal.SIGINT)
                    break
                time.sleep(POLL_S)
            stdout, stderr = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            if process.poll() is None:
                process.kill()
    lines = [line for line in stdout.splitlines() if line.startswith("LWGPU_RESULT ")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({process.returncode}): {stderr or stdout}")
    result = json.loads(lines[-1].removeprefix("LWGPU_RESULT "))
    result["rps"] = round(result["requests"] / (result["duration_us"] / 1e6), 1)
    result["errors_total"] = sum(result["errors"].values())
    return result


def _prepare(workdir: Path, body: bytes) -> tuple[Path, Path, Path]:
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed (Debian: apt-get install -y wrk)")
    workdir.mkdir(parents=True, exist_ok=True)
    tls = workdir / "tls"
    certs.generate(tls, "lwgpu-webhook", "lwgpu-system", dns=("localhost",), ips=("127.0.0.1",))
    (workdir / "body.json").write_bytes(body)
    (workdir / "bench.lua").write_text(WRK_SCRIPT)
    return tls, workdir / "body.json", workdir / "bench.lua"


def _server_args(tls: Path, workers: int, threads: int) -> list[str]:
    return [
        "--tls-cert",
        str(tls / "tls.crt"),
        "--tls-key",
        str(tls / "tls.key"),
        "--workers",
        str(workers),
        "--threads",
        str(threads),
    ]


def _check_answers(webhook: procs.Server, noop: procs.Server, body: bytes) -> str:
    """Both servers answer the benchmark's review with 200; the webhook's decision."""
    status, data = noop.call("POST", "/mutate", body)
    if status != 200 or not orjson.loads(data)["response"]["allowed"]:
        raise RuntimeError(f"no-op server answered {status}: {data[:300]!r}")
    status, data = webhook.call("POST", "/mutate", body)
    answer = orjson.loads(data).get("response", {}) if status == 200 else {}
    if status != 200 or "allowed" not in answer:
        raise RuntimeError(f"webhook answered {status}: {data[:300]!r}")
    return "mutated" if "patch" in answer else ("allowed" if answer["allowed"] else "denied")


def _aggregate(runs: list[dict]) -> dict:
    return {
        "rps": round(statistics.median(r["rps"] for r in runs), 1),
        "p50_ms": round(statistics.median(r["p50_us"] for r in runs) / 1000, 3),
        "p99_ms": round(statistics.median(r["p99_us"] for r in runs) / 1000, 3),
        "errors": sum(r["errors_total"] for r in runs),
        "busiest_worker_share": max(r["busiest_worker_share"] for r in runs),
        "cpu_us_per_request": statistics.median(r["cpu_us_per_request"] for r in runs),
        "runs": runs,
    }


def _measured(
    server: procs.Server, url: str, body: Path, script: Path, connections: int, duration_s: float
) -> dict:
    """A wrk run, plus how the servers' workers shared the CPU during it.

    gthread workers accept from one shared socket, so a few keep-alive connections
    can all land on one worker while the other idles: `busiest_worker_share` near
    1.0 says the run measured one worker, not two.
    """
    pids = procs.workers(server.process.pid)
    before = [procs.cpu_ticks(pid) for pid in pids]
    result = wrk(url, body, script, connections=connections, duration_s=duration_s)
    used = [procs.cpu_ticks(pid) - start for pid, start in zip(pids, before, strict=False)]
    result["worker_cpu_ticks"] = used
    # CPU per request does not depend on how connections fell between the workers.
    result["cpu_us_per_request"] = round(sum(used) / TICKS_PER_S * 1e6 / max(1, result["requests"]))
    result["busiest_worker_share"] = round(max(used) / max(1, sum(used)), 2)
    return result


def end_to_end(
    workdir: Path,
    body: bytes,
    *,
    connections: tuple[int, ...] = (8, 64),
    duration_s: float = 6,
    warmup_s: float = 2,
    repeats: int = 5,
    workers: int = 2,
    threads: int = 8,
) -> dict:
    """wrk against `webhook serve` and the no-op app, alternating, for each connection count."""
    tls, body_file, script = _prepare(workdir, body)
    args = _server_args(tls, workers, threads)
    results: dict = {
        "workers": workers,
        "threads": threads,
        "duration_s": duration_s,
        "repeats": repeats,
        "body_bytes": len(body),
        "levels": [],
    }
    with ExitStack() as stack:
        webhook = stack.enter_context(
            procs.serving("webhook", "webhook", ["serve", *args], tls / "ca.crt", workdir)
        )
        noop = stack.enter_context(
            procs.serving("noop", "tests.bench.noop", args, tls / "ca.crt", workdir)
        )
        results["decision"] = _check_answers(webhook, noop, body)
        for count in connections:
            runs: dict[str, list[dict]] = {"webhook": [], "noop": []}
            for repeat in range(repeats):
                order = (webhook, noop) if repeat % 2 == 0 else (noop, webhook)
                for server in order:
                    url = server.url + "/mutate"
                    wrk(url, body_file, script, connections=count, duration_s=warmup_s)
                    runs[server.name].append(
                        _measured(server, url, body_file, script, count, duration_s)
                    )
            level = {
                "connections": count,
                "webhook": _aggregate(runs["webhook"]),
                "noop": _aggregate(runs["noop"]),
            }
            level["ratio_rps"] = round(level["webhook"]["rps"] / level["noop"]["rps"], 3)
            # Each repeat ran the two servers back to back: its ratio saw the same machine
            # load, so the spread of these ratios shows how far one run's ratio can be trusted.
            level["pair_ratios"] = [
                round(hook["rps"] / floor["rps"], 3)
                for hook, floor in zip(runs["webhook"], runs["noop"], strict=False)
            ]
            results["levels"].append(level)
    return results


def memory(
    workdir: Path,
    body: bytes,
    *,
    checkpoints: tuple[int, ...] = (10_000, 50_000),
    connections: int = 8,
    workers: int = 2,
    threads: int = 8,
    max_phase_s: float = 300,
) -> dict:
    """RSS/PSS of a fresh `webhook serve` (master + workers) at start and after each checkpoint.

    Reviews are counted by the server's own metrics; each phase is bounded both by
    the number of reviews (wrk stops each thread at its share) and by `max_phase_s`.
    """
    tls, body_file, script = _prepare(workdir, body)
    samples = []
    with procs.serving(
        "webhook-memory",
        "webhook",
        ["serve", *_server_args(tls, workers, threads)],
        tls / "ca.crt",
        workdir,
    ) as server:
        samples.append({"reviews": server.reviews(), **procs.memory(server.process.pid)})
        for target in checkpoints:
            missing = target - server.reviews()
            if missing > 0:
                threads_used = min(2, connections)
                wrk(
                    server.url + "/mutate",
                    body_file,
                    script,
                    connections=connections,
                    duration_s=max_phase_s,
                    limit_per_thread=-(-missing // threads_used),
                    until=lambda goal=target: server.reviews() >= goal,
                )
            samples.append({"reviews": server.reviews(), **procs.memory(server.process.pid)})
    first, last = samples[1], samples[-1]
    growth = round(last["rss_mib"] - first["rss_mib"], 1)
    return {
        "samples": samples,
        "growth_rss_mib": growth,
        "growth_pct": round(100 * growth / first["rss_mib"], 2),
    }
