"""Start the real admission server (`python -m webhook serve`) on a free loopback port.

For tests and tools alike: `serving(...)` is a context manager that launches gunicorn over real
TLS with real certificates, polls `/healthz` with a deadline, yields a `Server` with HTTPS
helpers, and stops it with SIGTERM (the Pod's shutdown path). Stdout (the per-review JSON
log) and stderr land in files in the given directory. `make_certs` creates a certificate set
for it and `install_file_by_file` swaps one in as `certs generate` does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.parser import text_string_to_metric_families

import certs
from tools.loopback.https_client import NAMESPACE, SERVICE, SNI, Connection, client_context
from tools.paths import REPO
from tools.waiting import wait_for


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def make_certs(directory: Path, *, days: int = 365, force: bool = False) -> Path:
    """A real CA and serving certificate for the webhook Service and localhost in ``directory``."""
    certs.generate(
        directory,
        SERVICE,
        NAMESPACE,
        dns=("localhost",),
        ips=("127.0.0.1",),
        days=days,
        force=force,
    )
    return directory


def install_file_by_file(live: Path, source: Path, version: str) -> None:
    """Swap the set in ``source`` into the TLS directory ``live`` as ``certs generate`` writes
    one: key first, then certificate, each via rename."""
    live.mkdir(exist_ok=True)
    for name in ("ca.crt", "tls.key", "tls.crt"):
        shutil.copy(source / name, live / f".{name}.{version}")
        os.replace(live / f".{name}.{version}", live / name)


@dataclass
class Server:
    """A running `webhook serve`: its process, port, CA and log files."""

    process: subprocess.Popen[bytes]
    port: int
    ca: Path
    stdout: Path
    stderr: Path

    def connect(
        self,
        server_hostname: str = SNI,
        ca: Path | None = None,
        client_cert: tuple[Path, Path] | None = None,
    ) -> Connection:
        """A new verified HTTPS connection (not yet opened; the first request opens it)."""
        context = client_context(ca or self.ca, client_cert=client_cert)
        return Connection(self.port, context, server_hostname)

    @contextlib.contextmanager
    def raw_socket(self) -> Iterator[ssl.SSLSocket]:
        """A verified TLS socket for hand-written requests (see ``raw_request``)."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        with client_context(self.ca).wrap_socket(raw, server_hostname=SNI) as tls:
            yield tls

    def get(self, path: str) -> tuple[int, bytes]:
        """GET on a fresh connection: status and body."""
        with contextlib.closing(self.connect()) as conn:
            status, _, data = conn.call("GET", path)
            return status, data

    def review(self, endpoint: str, review: dict[str, Any]) -> tuple[int, Any]:
        """One AdmissionReview on a fresh connection."""
        with contextlib.closing(self.connect()) as conn:
            return conn.review(endpoint, review)

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """``/metrics`` parsed: (sample name, label items) -> value."""
        status, data = self.get("/metrics")
        assert status == 200, data
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(data.decode())
            for s in family.samples
        }

    def log_lines(self) -> list[dict[str, Any]]:
        """The per-review JSON lines the server wrote to stdout so far."""
        return [
            orjson.loads(line) for line in self.stdout.read_bytes().splitlines() if line.strip()
        ]

    def stop(self, timeout: float = 40) -> int:
        """SIGTERM (graceful) and wait; SIGKILL if it overstays. The exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def start(
    workdir: Path,
    policies: Path,
    tls_dir: Path | None,
    *,
    workers: int = 2,
    threads: int = 4,
    extra_args: tuple[str, ...] = (),
    launcher: tuple[str, ...] = (sys.executable, "-m", "webhook"),
    ca: Path | None = None,
    **kwargs: Any,
) -> Server:
    """Launch ``serve`` with these flags and return once ``/healthz`` answers over verified TLS.

    ``tls_dir=None`` passes no TLS flag (the development certificate; then give ``ca``);
    ``extra_args`` are appended (``--client-ca FILE``); ``launcher`` replaces
    ``python -m webhook`` for tests that wrap the command line; ``kwargs`` go to ``launch``.
    """
    port = free_port()
    tls = ["--tls-dir", str(tls_dir)] if tls_dir is not None else []
    command = [
        *launcher,
        "serve",
        "--port",
        str(port),
        "--policies",
        str(policies),
        *tls,
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        *extra_args,
    ]
    if ca is None:
        if tls_dir is None:
            raise ValueError("the development certificate's CA must be given as `ca`")
        ca = tls_dir / "ca.crt"
    return launch(command, workdir, port, ca, **kwargs)


def launch(
    command: list[str],
    workdir: Path,
    port: int,
    ca: Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 30,
    ready: str = "/healthz",
    server_hostname: str = SNI,
) -> Server:
    """Run a full server command line that listens on ``port``; return once ``ready`` answers 200.

    The readiness probe is verified against ``ca`` for ``server_hostname``; a server that
    exits first raises ``RuntimeError`` with its stderr. Logs go to ``workdir/server.*``.
    """
    stdout, stderr = workdir / "server.stdout", workdir / "server.stderr"
    environment = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    environment.update(env or {})
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        process = subprocess.Popen(command, cwd=REPO, env=environment, stdout=out, stderr=err)
    server = Server(process, port, ca, stdout, stderr)

    def healthy() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}:\n{stderr.read_text()}")
        try:
            with contextlib.closing(server.connect(server_hostname)) as conn:
                return conn.call("GET", ready)[0] == 200
        except OSError:
            return False

    try:
        wait_for(healthy, timeout, what=ready)
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def serving(
    workdir: Path, policies: Path, tls_dir: Path | None = None, **kwargs: Any
) -> Iterator[Server]:
    """``start`` (creating certificates in ``workdir/tls`` unless given), yield, then ``stop``."""
    if tls_dir is None:
        tls_dir = make_certs(workdir / "tls")
    server = start(workdir, policies, tls_dir, **kwargs)
    try:
        yield server
    finally:
        server.stop()
