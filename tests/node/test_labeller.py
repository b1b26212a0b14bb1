"""`label-node`: NVML (faked at the pynvml function boundary: there is no GPU here) to the labels
of a real Node on the real kube-apiserver of the session (tests/support/cluster.py).

The labeller acts as a ServiceAccount holding exactly the rules of the shipped lwgpu-labeller
ClusterRole (deploy/base/labeller.yaml) and labels a Node of the test's own, as the DaemonSet's
pod does with NODE_NAME from the downward API. Where it must not reach any API server (NVML
failed, --dry-run), it runs with no Kubernetes configuration at all: building a client would
fail and say so.
"""

import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fakes.nvml import FakeNVML
from tests.support.builders import MEM
from tools.waiting import wait_for
from webhook.cli import main
from webhook.kube.client import core_api
from webhook.node import labeller
from webhook.node.nvml import label_value

MIB = 2**20
P4_2Q = ("GRID P4-2Q", 2048 * MIB)
TESLA_P4 = ("Tesla P4", 7981694976)  # 7611.9 MiB: nvidia-smi prints 7611MiB


def expect(count, mem, name):
    """The three labels, spelled out."""
    return {
        "aliyun.accelerator/nvidia_count": count,
        "aliyun.accelerator/nvidia_mem": mem,
        "aliyun.accelerator/nvidia_name": name,
    }


SEED_LABELS = expect("1", "2048MiB", "GRID-P4-2Q")
# the label value grammar, from k8s.io/apimachinery validation
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@pytest.fixture
def no_cluster(monkeypatch, tmp_path):
    """No in-cluster account and a KUBECONFIG that does not exist: any client build fails."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("NODE_NAME", "gpu-1")


@pytest.fixture
def node(own_nodes, service_accounts, monkeypatch):
    """A Linux Node of the test's own, and the environment of the labeller's pod on it: its
    name in NODE_NAME, a kubeconfig of a ServiceAccount bound to the shipped role."""
    name = own_nodes.create("gpu", {"kubernetes.io/os": "linux"})
    kubeconfig = service_accounts.create("labeller")
    service_accounts.grant("labeller", "labeller.yaml", "lwgpu-labeller")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("NODE_NAME", name)
    return name


def methods(kube_requests):
    """The HTTP methods lwgpu's client sent, in order."""
    return [request.method for request in kube_requests.sent]


@pytest.mark.parametrize(
    "gpus,expected",
    [
        ([P4_2Q], SEED_LABELS),
        ([TESLA_P4], expect("1", "7611MiB", "Tesla-P4")),
        ([("Tesla T4", 15360 * MIB)] * 4, expect("4", "15360MiB", "Tesla-T4")),
        ([(b"GRID P4-1Q", 1024 * MIB)], expect("1", "1024MiB", "GRID-P4-1Q")),
    ],
    ids=["grid-p4-2q", "tesla-p4", "four-gpus", "bytes-name"],
)
def test_dry_run_prints_the_seed_format_and_contacts_nothing(
    no_cluster, monkeypatch, capsys, gpus, expected
):
    """--dry-run: the labels as `key=value`, and no client built (there is no configuration
    to build one from), so no API request."""
    FakeNVML(gpus).install(monkeypatch)
    assert main(["label-node", "--dry-run"]) == 0
    printed = capsys.readouterr()
    assert dict(line.split("=", 1) for line in printed.out.splitlines()) == expected
    assert printed.err == ""


@pytest.mark.parametrize(
    "name,value",
    [
        ("GRID P4-2Q", "GRID-P4-2Q"),
        ("NVIDIA GeForce RTX 3090 (Laptop/GPU) ™", "NVIDIA-GeForce-RTX-3090-LaptopGPU"),
        ("  A100-SXM4-40GB  ", "A100-SXM4-40GB"),
        ("Quadro " + "X" * 80, "Quadro-" + "X" * 56),
        ("(((", "unknown"),
    ],
)
def test_label_value_from_gpu_name(name, value):
    """Spaces become `-`; the rest is cut to a legal label value."""
    assert label_value(name) == value
    assert LABEL_VALUE.match(value) and len(value) <= 63


@given(st.text())
def test_any_gpu_name_gives_a_legal_label_value(name):
    """Whatever NVML reports, the label value is legal."""
    value = label_value(name)
    assert LABEL_VALUE.match(value) and 0 < len(value) <= 63


@pytest.mark.parametrize(
    "gpus,fail,message",
    [
        ([P4_2Q], {"nvmlInit": pynvml.NVML_ERROR_LIBRARY_NOT_FOUND}, "libnvidia-ml.so.1 not found"),
        (
            [P4_2Q],
            {"nvmlInit": pynvml.NVML_ERROR_DRIVER_NOT_LOADED},
            "NVML_ERROR_DRIVER_NOT_LOADED",
        ),
        ([P4_2Q], {"nvmlInit": pynvml.NVML_ERROR_NO_PERMISSION}, "NVML_ERROR_NO_PERMISSION"),
        (
            [P4_2Q],
            {"nvmlInit": pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH},
            "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        ),
        (
            [P4_2Q],
            {"nvmlDeviceGetHandleByIndex": pynvml.NVML_ERROR_GPU_IS_LOST},
            "NVML_ERROR_GPU_IS_LOST",
        ),
        (
            [P4_2Q],
            {"nvmlDeviceGetMemoryInfo": pynvml.NVML_ERROR_NOT_SUPPORTED},
            "NVML_ERROR_NOT_SUPPORTED",
        ),
        ([], {}, "no GPU"),
    ],
)
def test_nvml_failure_exits_2_before_any_api_call(
    no_cluster, monkeypatch, capsys, gpus, fail, message
):
    """Each NVML failure: exit 2, one line naming the cause (not the missing configuration: no
    client was built), NVML shut down again."""
    nvml = FakeNVML(gpus, fail).install(monkeypatch)
    assert main(["label-node", "--once"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
    assert nvml.ready is False  # NVML shut down again after a failed read


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has an NVIDIA driver")
def test_real_pynvml_without_a_driver_names_the_library(no_cluster):
    """`python -m webhook label-node` with the real pynvml and no driver: exit 2, library named,
    before any Kubernetes configuration is looked for."""
    with pytest.raises(OSError):
        ctypes.CDLL("libnvidia-ml.so.1")
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "label-node"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "libnvidia-ml.so.1 not found" in done.stderr and done.stdout == ""
    assert "Kubernetes configuration" not in done.stderr


def test_patch_carries_exactly_the_three_labels_then_is_idempotent(
    node, own_nodes, kube_requests, monkeypatch
):
    """First run: one merge patch with the three labels; second run: read only, no patch."""
    FakeNVML([P4_2Q]).install(monkeypatch)
    assert main(["label-node"]) == 0
    patches = [r for r in kube_requests.sent if r.method == "PATCH"]
    assert [(r.path, r.content_type) for r in patches] == [
        (f"/api/v1/nodes/{node}", "application/merge-patch+json")
    ]
    assert patches[0].body == {"metadata": {"labels": SEED_LABELS}}
    assert own_nodes.labels(node) == {"kubernetes.io/os": "linux", **SEED_LABELS}
    kube_requests.sent.clear()
    assert main(["label-node", "--once"]) == 0
    assert methods(kube_requests) == ["GET"]


def test_a_drifted_label_is_patched_back(node, own_nodes, monkeypatch):
    """Someone changed one label: the next run writes the GPU's truth again."""
    FakeNVML([TESLA_P4]).install(monkeypatch)
    own_nodes.relabel(node, {**SEED_LABELS, "aliyun.accelerator/nvidia_mem": "2048MiB"})
    assert main(["label-node", "--node", node]) == 0
    labels = own_nodes.labels(node)
    assert labels["aliyun.accelerator/nvidia_mem"] == "7611MiB"
    assert labels["aliyun.accelerator/nvidia_name"] == "Tesla-P4"


@pytest.mark.parametrize(
    "argv,env,code,message",
    [
        (["--node", "ghost"], True, 1, 'node "ghost" not found'),
        ([], False, 2, "set NODE_NAME"),
    ],
)
def test_missing_node_is_a_clear_error(
    node, kube_requests, monkeypatch, capsys, argv, env, code, message
):
    """A node that does not exist (a real 404: the shipped role may get any Node, so RBAC
    does not answer 403 first), or no node name at all, fails with a message that says so."""
    FakeNVML([P4_2Q]).install(monkeypatch)
    if not env:
        monkeypatch.delenv("NODE_NAME")
    assert main(["label-node", *argv]) == code
    assert message in capsys.readouterr().err
    assert "PATCH" not in methods(kube_requests)


def test_interval_survives_an_apiserver_restart_and_recovers(
    node, own_nodes, control_plane, monkeypatch
):
    """With --interval, the failures while kube-apiserver is down are logged and retried; once
    it is back, labels someone removed meanwhile are written again."""
    FakeNVML([P4_2Q]).install(monkeypatch)
    api = core_api()
    stop, result, lines = threading.Event(), [], []
    labels = {**SEED_LABELS}
    thread = threading.Thread(
        target=lambda: result.append(labeller.run(api, node, labels, 0.2, stop, lines.append))
    )
    thread.start()
    try:
        assert wait_for(lambda: own_nodes.labels(node).get(MEM) == "2048MiB", timeout=60)
        # The stop runs aside (it may wait out the apiserver's grace period); the start is
        # this thread's: components start with PR_SET_PDEATHSIG, which fires when the thread
        # that started them ends.
        stopping = threading.Thread(target=control_plane.stop, args=("kube-apiserver",))
        stopping.start()
        try:
            # said once, however many ticks fail (tests/cluster/apiserver_faults/test_labeller.py)
            assert wait_for(lambda: any("unreachable" in line for line in lines), timeout=60)
        finally:
            stopping.join(60)
            control_plane.restart_apiserver()  # already stopped: starts it and awaits /readyz
        own_nodes.relabel(node, dict.fromkeys(SEED_LABELS))
        assert wait_for(
            lambda: own_nodes.labels(node) == {"kubernetes.io/os": "linux", **SEED_LABELS},
            timeout=60,
        )
    finally:
        stop.set()
        thread.join(30)
    assert result == [True]


def test_sigterm_stops_the_interval_loop(node, own_nodes, monkeypatch):
    """SIGTERM during the wait between checks ends the agent promptly with exit 0."""
    FakeNVML([P4_2Q]).install(monkeypatch)

    def terminate_after_the_labels() -> None:
        if wait_for(lambda: MEM in own_nodes.labels(node), timeout=60):
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_after_the_labels, daemon=True).start()
    started = time.monotonic()
    assert main(["label-node", "--interval", "3600"]) == 0
    assert time.monotonic() - started < 60
    assert own_nodes.labels(node)["aliyun.accelerator/nvidia_count"] == "1"
