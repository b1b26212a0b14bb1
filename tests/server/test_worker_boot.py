"""A worker restarting while the TLS files are unusable: the server stays up on the last good pair.

gunicorn checks in every worker it forks that its ``certfile`` exists, and halts the whole
server when a worker fails to boot (issue 28). Here both workers are killed in turn while the
key is missing, half-written or of another pair: the master and the other worker must stay,
each new worker must serve the newest certificate the server loaded (not the one it started
with), and ``/readyz`` must report the files until they are whole again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tests.support.builders import admission_review, gpu_pod
from tests.support.paths import REPO
from tools.loopback.server import Server, install_file_by_file, make_certs, serving
from tools.reliability import procfs
from tools.waiting import wait_for

POLICY = REPO / "policies" / "default.yaml"
REVIEW = admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="boot-review")
# Fresh connections per check: with reuse_port the kernel spreads them over both workers.
CONNECTIONS = 10


def _half_written(live: Path, other: Path) -> None:
    key = (live / "tls.key").read_bytes()
    (live / "tls.key").write_bytes(key[: len(key) // 2])


# How the files go bad: (live directory, another certificate set) -> None.
BREAK = {
    "missing-key": lambda live, other: (live / "tls.key").unlink(),
    "half-written-key": _half_written,
    "key-of-another-pair": lambda live, other: shutil.copy(other / "tls.key", live / "tls.key"),
}


@pytest.fixture(scope="module")
def cert_sets(tmp_path_factory):
    """The set the server starts with, and the set it is rotated to (own CA each)."""
    root = tmp_path_factory.mktemp("certsets")
    return make_certs(root / "start"), make_certs(root / "rotated")


def policy_loads(server: Server) -> float:
    """Policy loads counted by all the workers so far (each counts one as it boots)."""
    return server.metrics().get(("lwgpu_policy_reloads_total", frozenset()), 0.0)


def served_certificate(server: Server) -> bytes:
    """The certificate presented on a new connection (DER), after a review answered 200."""
    conn = server.connect()
    try:
        status, body = conn.review("mutate", REVIEW)
        assert (status, body["response"]["uid"]) == (200, "boot-review")
        der: bytes = conn.sock.getpeercert(binary_form=True)
        return der
    finally:
        conn.close()


def master_alive(server: Server) -> bool:
    """True while the master runs; fails the test with its log once it has exited."""
    assert server.process.poll() is None, f"the master exited:\n{server.stderr.read_text()}"
    return True


def replace_worker(server: Server, victim: int, booted: float) -> None:
    """SIGKILL ``victim`` and return once its replacement has booted (policy load ``booted``)."""
    master = server.process.pid
    other = procfs.children(master) - {victim}
    os.kill(victim, signal.SIGKILL)

    def replaced() -> bool:
        master_alive(server)
        # Refused when no worker listens: the master halted them all (checked on the next poll).
        with contextlib.suppress(OSError):
            return policy_loads(server) == booted
        return False

    wait_for(replaced, what=f"a worker in place of {victim}")
    workers = procfs.children(master)
    assert len(workers) == 2 and victim not in workers and other <= workers


@pytest.mark.parametrize("break_files", list(BREAK.values()), ids=list(BREAK))
def test_workers_restart_on_the_last_good_pair_while_the_files_are_bad(
    tmp_path, cert_sets, break_files: Callable[[Path, Path], None]
):
    start, rotated = cert_sets
    live = shutil.copytree(start, tmp_path / "live")
    rotated_der = x509.load_pem_x509_certificate((rotated / "tls.crt").read_bytes()).public_bytes(
        Encoding.DER
    )
    with serving(tmp_path, POLICY, live, workers=2, threads=2) as server:
        # Trust both CAs: the server serves the starting set until it has read the rotated one.
        server.ca = tmp_path / "both-ca.crt"
        server.ca.write_bytes((start / "ca.crt").read_bytes() + (rotated / "ca.crt").read_bytes())
        wait_for(lambda: policy_loads(server) == 2, 60, what="both workers booted")
        install_file_by_file(live, rotated, "v2")
        # A worker records a pair as the last good one before it serves it.
        wait_for(lambda: served_certificate(server) == rotated_der, what="the rotated pair")

        break_files(live, start)
        first, second = sorted(procfs.children(server.process.pid))
        replace_worker(server, first, booted=3)
        replace_worker(server, second, booted=4)

        # Only workers that booted while the files were bad are left.
        for _ in range(CONNECTIONS):
            assert served_certificate(server) == rotated_der
            status, body = server.get("/readyz")
            assert status == 503
            (problem,) = orjson.loads(body)["problems"]
            assert problem.startswith(f"cannot load TLS certificate {live}/tls.crt")

        install_file_by_file(live, rotated, "v3")
        wait_for(
            lambda: all(server.get("/readyz")[0] == 200 for _ in range(CONNECTIONS)),
            what="/readyz 200 from every worker",
        )
    assert server.process.returncode == 0
