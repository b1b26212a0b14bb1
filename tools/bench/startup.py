"""Time from starting `webhook serve` to its first `/readyz` 200, from the checkout and as
the image starts it.

- `checkout`: `python -m webhook serve` in the checkout, its `__pycache__` as the last run
  left it (what `make run` does);
- `read-only, compiled`: the image, approximated: `webhook/`, `certs/` and `policies/` of
  HEAD (`git archive`, as `lineup.checkout`) compiled with `compileall` as deploy/Dockerfile
  does, then made read-only, and run with `PYTHONDONTWRITEBYTECODE=1` (the image's ENV); the
  libraries are this venv's, compiled when pip installed them (the image compiles those the
  server imports);
- `read-only, no bytecode`: the same copy without compiling it, so every start compiles the
  webhook's own modules in memory: what a start costs if the image lost its bytecode.

Each start is 2 workers × 8 threads with the default policy; the master and its workers are
stopped after each. The variants rotate between rounds. The clock runs from just before the
process is forked to the first 200 from `/readyz` (answered by a worker: the master alone
is not ready), polled every 10 ms over verified TLS.
"""

from __future__ import annotations

import compileall
import http.client
import os
import ssl
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tools.loopback.server import free_port
from tools.paths import REPO

from . import lineup, procs, rounds

VARIANTS = ("checkout", "read-only, compiled", "read-only, no bytecode")
POLL_S = 0.01
READY_TIMEOUT_S = 60


def _read_only(root: Path) -> None:
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            path.chmod(path.stat().st_mode & 0o555)
    root.chmod(0o555)


def _roots(workdir: Path) -> dict[str, Path]:
    _, compiled = lineup.checkout("HEAD", workdir / "compiled")
    compileall.compile_dir(compiled, quiet=1)
    _, plain = lineup.checkout("HEAD", workdir / "plain")
    for root in (compiled, plain):
        _read_only(root)
    return {VARIANTS[0]: REPO, VARIANTS[1]: compiled, VARIANTS[2]: plain}


def _ready(port: int, context: ssl.SSLContext) -> bool:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def time_to_ready(root: Path, tls: Path, workdir: Path, *, workers: int, threads: int) -> float:
    """Seconds from starting `webhook serve` from `root` to its first /readyz 200."""
    port = free_port()
    env = procs.environment(root)
    if root != REPO:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [
        sys.executable,
        "-m",
        "webhook",
        "serve",
        *lineup.tls_args(tls),
        *("--workers", str(workers), "--threads", str(threads), "--port", str(port)),
    ]
    context = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    log = workdir / "startup"
    began = time.monotonic()
    process = procs.launch(argv, root, env, log.with_suffix(".stdout"), log.with_suffix(".stderr"))
    try:
        while not _ready(port, context):
            if process.poll() is not None:
                raise RuntimeError(
                    f"webhook serve from {root} exited with {process.returncode}:\n"
                    + log.with_suffix(".stderr").read_text(errors="replace")[-2000:]
                )
            if time.monotonic() - began > READY_TIMEOUT_S:
                raise TimeoutError(f"webhook serve from {root}: not ready in {READY_TIMEOUT_S} s")
            time.sleep(POLL_S)
        return time.monotonic() - began
    finally:
        procs.stop(process)


def ready_times(
    workdir: Path, *, repeats: int = 5, workers: int = 2, threads: int = 8
) -> dict[str, Any]:
    """Each variant's start `repeats` times, rotating: the median, range and every start."""
    workdir.mkdir(parents=True, exist_ok=True)
    tls = workdir / "tls"
    lineup.certificates(tls)
    roots = _roots(workdir)
    seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for repeat in range(repeats):
        for name in rounds.rotated(VARIANTS, repeat):
            took = time_to_ready(roots[name], tls, workdir, workers=workers, threads=threads)
            seconds[name].append(round(took, 3))
    return {
        "workers": workers,
        "threads": threads,
        "repeats": repeats,
        # Root ignores file modes: that nothing was written is checked, not assumed.
        "bytecode_written": len(list(roots[VARIANTS[2]].rglob("*.pyc"))),
        "variants": {
            name: {
                "median_s": round(statistics.median(values), 3),
                "range_s": [min(values), max(values)],
                "starts_s": values,
            }
            for name, values in seconds.items()
        },
    }
