"""`label-node`: NVML (faked at the pynvml function boundary) to node labels on the API double."""

import ctypes
import json
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
from tests.support.builders import gpu_node
from tests.support.waiting import wait_for
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
def kube(kube, tmp_path, monkeypatch):
    """The API double with a GPU node, reached through kubeconfig as the CLI would."""
    kube.seed(gpu_node("gpu-1"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", kube.write_kubeconfig(tmp_path / "kubeconfig"))
    monkeypatch.setenv("NODE_NAME", "gpu-1")
    return kube


def labels_of(kube, name="gpu-1"):
    """The node's labels as stored."""
    return kube.get("v1", "Node", name)["metadata"].get("labels", {})


def methods(kube):
    """The HTTP methods the double has seen, in order."""
    return [request.method for request in kube.requests]


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
    kube, monkeypatch, capsys, gpus, expected
):
    """--dry-run: the labels as `key=value`, no API request."""
    FakeNVML(gpus).install(monkeypatch)
    assert labeller.main(["--dry-run"]) == 0
    printed = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert printed == expected
    assert kube.requests == []


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
def test_nvml_failure_exits_2_before_any_api_call(kube, monkeypatch, capsys, gpus, fail, message):
    """Each NVML failure: exit 2, one line naming the cause, no request, labels untouched."""
    nvml = FakeNVML(gpus, fail).install(monkeypatch)
    assert labeller.main(["--once"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
    assert kube.requests == []
    assert labels_of(kube) == {"kubernetes.io/os": "linux"}
    assert nvml.ready is False  # NVML shut down again after a failed read


@pytest.mark.skipif(os.path.exists("/dev/nvidiactl"), reason="this machine has an NVIDIA driver")
def test_real_pynvml_without_a_driver_names_the_library(kube):
    """`python -m webhook label-node` with the real pynvml and no driver: exit 2, library named."""
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
    assert kube.requests == []


def test_patch_carries_exactly_the_three_labels_then_is_idempotent(kube, monkeypatch):
    """First run: one merge patch with the three labels; second run: read only, no patch."""
    FakeNVML([P4_2Q]).install(monkeypatch)
    assert labeller.main([]) == 0
    patches = [r for r in kube.requests if r.method == "PATCH"]
    assert [(r.path, r.content_type) for r in patches] == [
        ("/api/v1/nodes/gpu-1", "application/merge-patch+json")
    ]
    assert json.loads(patches[0].body) == {"metadata": {"labels": SEED_LABELS}}
    assert labels_of(kube) == {"kubernetes.io/os": "linux", **SEED_LABELS}
    kube.requests.clear()
    assert labeller.main(["--once"]) == 0
    assert methods(kube) == ["GET"]


def test_a_drifted_label_is_patched_back(kube, monkeypatch):
    """Someone changed one label: the next run writes the GPU's truth again."""
    FakeNVML([TESLA_P4]).install(monkeypatch)
    kube.seed(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "gpu-1",
                "labels": {**SEED_LABELS, "aliyun.accelerator/nvidia_mem": "2048MiB"},
            },
        }
    )
    assert labeller.main(["--node", "gpu-1"]) == 0
    assert labels_of(kube)["aliyun.accelerator/nvidia_mem"] == "7611MiB"
    assert labels_of(kube)["aliyun.accelerator/nvidia_name"] == "Tesla-P4"


@pytest.mark.parametrize(
    "argv,env,code,message",
    [
        (["--node", "ghost"], "gpu-1", 1, 'node "ghost" not found'),
        ([], None, 2, "set NODE_NAME"),
    ],
)
def test_missing_node_is_a_clear_error(kube, monkeypatch, capsys, argv, env, code, message):
    """A node that does not exist, or no node name at all, fails with a message that says so."""
    FakeNVML([P4_2Q]).install(monkeypatch)
    if env is None:
        monkeypatch.delenv("NODE_NAME")
    assert labeller.main(argv) == code
    assert message in capsys.readouterr().err
    assert "PATCH" not in methods(kube)


def test_interval_survives_an_outage_and_recovers(kube, monkeypatch):
    """With --interval, 503s are logged and retried; once the API is back the labels return."""
    FakeNVML([P4_2Q]).install(monkeypatch)
    api = core_api()
    stop, result, lines = threading.Event(), [], []
    labels = {**SEED_LABELS}
    thread = threading.Thread(
        target=lambda: result.append(labeller.run(api, "gpu-1", labels, 0.02, stop, lines.append))
    )
    thread.start()
    assert wait_for(lambda: labels_of(kube).get("aliyun.accelerator/nvidia_mem") == "2048MiB")
    kube.set_down(True)
    kube.seed({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}})  # labels wiped
    assert wait_for(lambda: sum("503" in line for line in lines) >= 2)
    kube.set_down(False)
    assert wait_for(lambda: labels_of(kube) == SEED_LABELS)
    stop.set()
    thread.join(5)
    assert result == [0]


def test_sigterm_stops_the_interval_loop(kube, monkeypatch):
    """SIGTERM during the wait between checks ends the agent promptly with exit 0."""
    FakeNVML([P4_2Q]).install(monkeypatch)

    def terminate_after_first_patch():
        if wait_for(lambda: "PATCH" in methods(kube)):
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=terminate_after_first_patch, daemon=True).start()
    started = time.monotonic()
    assert labeller.main(["--interval", "3600"]) == 0
    assert time.monotonic() - started < 30
    assert labels_of(kube)["aliyun.accelerator/nvidia_count"] == "1"
