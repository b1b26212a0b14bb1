"""What the tests of lwgpu's API clients under apiserver faults share (test_*.py here):
the labels the labeller writes, the inventory's log lines, stopping and restarting the
apiserver, and a listener that closes every connection."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.support.builders import MEM, NAME, gpu_mem, pod
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for

LOG = "webhook.kube.inventory"
DISCOVERY = "../components/discovery/discovery.yaml"
LABELS = {"aliyun.accelerator/nvidia_count": "1", MEM: "2048MiB", NAME: "GRID-P4-2Q"}


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """The inventory's log lines at exactly `level`."""
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno == level]


def stopped_apiserver(plane):
    """Stop kube-apiserver aside (its grace period takes a while); the caller starts it again
    from its own thread: components start with PR_SET_PDEATHSIG, which fires when the thread
    that started them ends."""
    stopping = threading.Thread(target=plane.stop, args=("kube-apiserver",))
    stopping.start()
    return stopping


def restart(plane: ControlPlane, *flags: str) -> None:
    """Restart this package's kube-apiserver (`flags` for this run only), then wait until it
    admits a pod again: it answers /readyz before its admission plugins have their informers
    back, and the next step of a test must not meet that gap."""
    plane.restart_apiserver(*flags)
    probe = json.dumps(pod(gpu_mem(2)))

    def admits() -> bool:
        args = ("-n", "default", "create", "--dry-run=server", "-o", "json", "-f", "-")
        return plane.kubectl(*args, input=probe, check=False).returncode == 0

    wait_for(admits, 60, what="the restarted apiserver to admit a pod again")


@contextlib.contextmanager
def closing_listener(port: int) -> Iterator[None]:
    """On `port`, what a load balancer with no backend does: accept, then close at once."""
    listener = socket.create_server(("127.0.0.1", port))
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError):
                listener.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)
