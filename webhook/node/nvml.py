"""Read the node's GPU through NVML and turn it into the cloud's node labels.

The labels are exactly the ones the lightweight-GPU cloud sets itself (docs/CLI.md, label-node):
`aliyun.accelerator/nvidia_count`, `nvidia_mem` ("<MiB>MiB", as nvidia-smi prints it) and
`nvidia_name` (the GPU name with spaces replaced by `-`).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

import pynvml

from webhook.api.names import COUNT_LABEL, MEM_LABEL, NAME_LABEL

LIBRARY = "libnvidia-ml.so.1"

_ILLEGAL = re.compile(r"[^A-Za-z0-9_.-]")
_EDGES = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


class NvmlUnavailable(Exception):
    """NVML could not report the GPU; the message names the cause for the node's log."""


@dataclass(frozen=True)
class GPUInfo:
    """What the labels are made of: how many GPUs, and GPU 0's memory and name."""

    count: int
    memory_mib: int
    name: str


def _error_name(err: pynvml.NVMLError) -> str:
    """The NVML_ERROR_* constant for an NVMLError, as NVIDIA's docs and forums spell it."""
    for attr in dir(pynvml):
        if attr.startswith("NVML_ERROR_") and getattr(pynvml, attr) == err.value:
            return attr
    return f"NVML error {err.value}"


def describe(err: pynvml.NVMLError) -> str:
    """One line naming the cause of an NVML failure."""
    name = _error_name(err)
    if name == "NVML_ERROR_LIBRARY_NOT_FOUND":
        return f"{LIBRARY} not found ({name}): no NVIDIA driver on this node, or it is not mounted"
    return f"{name}: {err}"


def _text(value: bytes | str) -> str:
    # older nvidia-ml-py releases return bytes, newer ones str
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def read_gpu() -> GPUInfo:
    """Query NVML for the GPU count and GPU 0's total memory and name.

    Raises NvmlUnavailable, with the cause in its message, when NVML cannot answer or the node
    has no GPU.
    """
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        raise NvmlUnavailable(describe(err)) from err
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count < 1:
            raise NvmlUnavailable("NVML reports no GPU on this node")
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
        name = _text(pynvml.nvmlDeviceGetName(handle))
    except pynvml.NVMLError as err:
        raise NvmlUnavailable(describe(err)) from err
    finally:
        # the reading is already taken; a failed shutdown changes nothing about it
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    return GPUInfo(count=count, memory_mib=total // 2**20, name=name)


def label_value(text: str) -> str:
    """A valid Kubernetes label value from a GPU name: spaces become `-`, other illegal
    characters are dropped, at most 63 characters, alphanumeric at both ends."""
    value = _ILLEGAL.sub("", re.sub(r"\s+", "-", text.strip()))[:63]
    return _EDGES.sub("", value) or "unknown"


def gpu_labels(info: GPUInfo) -> dict[str, str]:
    """The three node labels for a GPU reading, in the seed's format."""
    return {
        COUNT_LABEL: str(info.count),
        MEM_LABEL: f"{info.memory_mib}MiB",
        NAME_LABEL: label_value(info.name),
    }
