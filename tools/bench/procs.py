"""The server processes a benchmark starts: launched, awaited, measured and always stopped.

Each server (a gunicorn master and its workers) runs in a session of its own, so
the whole group can be signalled at once, and the master is told by the kernel
to exit if the benchmark dies without cleaning up (PR_SET_PDEATHSIG; gunicorn's
workers follow their master). `serving` stops the group on any exit: normal,
error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from prometheus_client.parser import text_string_to_metric_families

from tools.loopback.server import free_port
from tools.paths import REPO

STOP_GRACE_S = 40  # gunicorn's graceful timeout is 30 s
START_TIMEOUT_S = 60
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: SIGTERM it when the benchmark process dies.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Server:
    """A running server: its master process, port and the CA that signed its certificate."""

    name: str
    process: subprocess.Popen[bytes]
    port: int
    ca: Path

    @property
    def url(self) -> str:
        """Base HTTPS URL on loopback."""
        return f"https://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[int, bytes]:
        """GET `path` over verified TLS on a new connection: status and body."""
        return self.call("GET", path)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """One request over verified TLS on a new connection: status and body."""
        context = ssl.create_default_context(cafile=str(self.ca))
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=10)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def metric(self, name: str) -> float:
        """The sum of a metric's samples in the server's Prometheus metrics (all workers)."""
        status, data = self.get("/metrics")
        if status != 200:
            raise RuntimeError(f"{self.name}: GET /metrics answered {status}")
        return sum(
            sample.value
            for family in text_string_to_metric_families(data.decode())
            for sample in family.samples
            if sample.name == name
        )

    def reviews(self) -> int:
        """Reviews the server answered so far (all workers)."""
        return int(self.metric("lwgpu_admission_reviews_total"))


def _healthy(server: Server, log: Path) -> bool:
    if server.process.poll() is not None:
        raise RuntimeError(
            f"{server.name} exited with {server.process.returncode}:\n"
            f"{log.read_text(errors='replace')[-3000:]}"
        )
    try:
        return server.get("/healthz")[0] == 200
    except (OSError, ssl.SSLError, http.client.HTTPException):
        return False


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group (master and workers), SIGKILL it if it overstays."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_GRACE_S)
    # Workers orphaned by a master killed from outside still hold the group id.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def environment(root: Path) -> dict[str, str]:
    """This process's environment for a server run from `root` (its own metrics folder)."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


def launch(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    stdout: Path,
    stderr: Path,
    piped: bool = False,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a session of its own that dies with this process (`stop` ends it);
    stdout to a pipe when `piped`, else to its file."""
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE if piped else out,
            stderr=err,
            # Forked before any client thread starts, so preexec_fn is safe here.
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


@contextlib.contextmanager
def serving(
    name: str,
    module: str,
    args: list[str],
    ca: Path,
    workdir: Path,
    piped: bool = False,
    *,
    program: list[str] | None = None,
    root: Path = REPO,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[Server]:
    """Run `python -m module *args --port P` until the block ends; yield once /healthz answers.

    `piped`: stdout is a pipe that this process copies to the log file, as a container
    runtime reads a container's stdout (every worker writes to the same pipe).
    `program` replaces `python -m module` (a Go peer); `root` is the checkout to run from
    (another commit's source, to compare two versions side by side); `extra_env` is added to
    its environment.
    """
    port = free_port()
    stdout, stderr = workdir / f"{name}.stdout", workdir / f"{name}.stderr"
    argv = [*(program or [sys.executable, "-m", module]), *args, "--port", str(port)]
    env = {**environment(root), **(extra_env or {})}
    process = launch(argv, root, env, stdout, stderr, piped)
    if piped:
        assert process.stdout is not None
        threading.Thread(target=_copy, args=(process.stdout, stdout), daemon=True).start()
    server = Server(name, process, port, ca)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _healthy(server, stderr):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} did not answer /healthz within {START_TIMEOUT_S}s")
            time.sleep(0.1)
        yield server
    finally:
        stop(process)


def _copy(pipe: IO[bytes], path: Path) -> None:
    # Until the server closes its end: what a container runtime's log reader does.
    with pipe, open(path, "ab") as out:
        for chunk in iter(lambda: os.read(pipe.fileno(), 1 << 16), b""):
            out.write(chunk)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as file:
                found += [int(child) for child in file.read().split()]
    return found


def workers(master: int) -> list[int]:
    """The pids of a gunicorn master's workers."""
    return _children(master)


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of a process so far, in clock ticks (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _status_kib(pid: int, field: str, name: str = "status") -> int:
    with open(f"/proc/{pid}/{name}") as file:
        for line in file:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def memory(master: int) -> dict[str, Any]:
    """RSS and PSS (MiB) of a gunicorn master and its workers, from /proc.

    RSS counts the pages workers share with the master (copy-on-write after fork)
    once per process, as the issue asks; PSS splits shared pages between them and
    so adds up to what the processes really occupy.
    """
    pids = [master, *_children(master)]
    rss = {pid: _status_kib(pid, "VmRSS") for pid in pids}
    pss = {pid: _status_kib(pid, "Pss", "smaps_rollup") for pid in pids}
    return {
        "processes": len(pids),
        "rss_mib": round(sum(rss.values()) / 1024, 1),
        "pss_mib": round(sum(pss.values()) / 1024, 1),
        "master_rss_mib": round(rss[master] / 1024, 1),
        "worker_rss_mib": [round(rss[pid] / 1024, 1) for pid in pids[1:]],
    }
