"""One bounded `wrk` run: closed loop (as fast as answers come) or at a fixed offered rate.

`wrk` (Debian package `wrk`) POSTs the same AdmissionReview with `Content-Type:
application/json` from a Lua script that prints its numbers as one JSON line. With
`delay_ms`, each connection waits a random 0..2×`delay_ms` ms before each request (Lua's
`delay()`), so 8 connections with 40 ms offer about 200 reviews/s spread out in time instead
of in bursts of 8; latency then measures the server at that rate rather than the queue a
closed loop builds. Every run is bounded in time, and optionally in count.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCRIPT = r"""
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

local pause = tonumber(os.getenv("LWGPU_BENCH_DELAY_MS") or "0")
if pause > 0 then
  -- Each wrk thread has its own Lua state: seed each differently (a table's address).
  init = function(args)
    math.randomseed(tonumber(tostring({}):match("0x(%x+)"), 16) % 2147483647)
  end
  delay = function() return math.random(0, 2 * pause) end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'LWGPU_RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,' ..
    '"p999_us":%d,"max_us":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
"""
SLACK_S = 30
POLL_S = 0.25


def write_script(path: Path) -> Path:
    """Write the Lua script to `path`; return it."""
    path.write_text(SCRIPT)
    return path


def run(
    url: str,
    body: Path,
    script: Path,
    *,
    connections: int,
    duration_s: float,
    delay_ms: int = 0,
    limit_per_thread: int = 0,
    until: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """One wrk run against `url`: requests, throughput, latency percentiles and errors.

    wrk always sleeps out its `-d` duration; when `until()` turns true (polled a few
    times a second) it is interrupted (SIGINT), and then reports as usual.
    """
    threads = min(2, connections)
    env = {
        **os.environ,
        "LWGPU_BENCH_BODY": str(body),
        "LWGPU_BENCH_LIMIT": str(limit_per_thread),
        "LWGPU_BENCH_DELAY_MS": str(delay_ms),
    }
    command = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{duration_s:g}s"]
    command += ["--timeout", "5s", "-s", str(script), url]
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:
            deadline = time.monotonic() + duration_s + SLACK_S
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
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("LWGPU_RESULT "))
    result["rps"] = round(result["requests"] / (result["duration_us"] / 1e6), 1)
    result["errors_total"] = sum(result["errors"].values())
    return result
