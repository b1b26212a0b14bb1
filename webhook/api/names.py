"""The names lwgpu reads and writes on Kubernetes objects: resources, node labels, annotations.

The node labels are the ones the lightweight-GPU cloud sets on its nodes (docs/CLI.md,
label-node) and that `label-node` writes where the cloud does not, and those NVIDIA's GPU
Feature Discovery sets on other fleets.
"""

import re
from typing import Final

GPU_RESOURCE: Final = "nvidia.com/gpu"

COUNT_LABEL: Final = "aliyun.accelerator/nvidia_count"
MEM_LABEL: Final = "aliyun.accelerator/nvidia_mem"
NAME_LABEL: Final = "aliyun.accelerator/nvidia_name"
# A `nvidia_mem` value as nodes carry it, "<MiB>MiB" as nvidia-smi prints it: 2048MiB, 7611MiB.
MEM_VALUE: Final = re.compile(r"([0-9]+)MiB")

# What NVIDIA's GPU Feature Discovery labels a GPU node with, where no cloud sets the labels
# above (github.com/NVIDIA/k8s-device-plugin, internal/lm): resource.go `baseLabeler` writes
# `<resource>.product`, `.count`, `.replicas` and `.sharing-strategy`, `NewGPUResourceLabeler`
# `.memory` (NVML's total memory / 2^20, `fmt.Sprintf("%v")` of an integer: 15360), vgpu.go
# `Labels` `vgpu.present` ("true" where the node's GPU is a vGPU).
GFD_MEMORY_LABEL: Final = "nvidia.com/gpu.memory"
GFD_COUNT_LABEL: Final = "nvidia.com/gpu.count"
# `sanitise`d NVML name, spaces to '-': GRID-T4-4Q; "-SHARED" appended when time-sliced or
# MPS-shared and the resource is not renamed (`getProductName`).
GFD_PRODUCT_LABEL: Final = "nvidia.com/gpu.product"
GFD_VGPU_LABEL: Final = "nvidia.com/vgpu.present"
# none, time-slicing or mps (api/config/v1/sharing.go `SharingStrategy`); anything but none
# only with replicas > 1, which older releases say by `.replicas` alone.
GFD_SHARING_LABEL: Final = "nvidia.com/gpu.sharing-strategy"
GFD_REPLICAS_LABEL: Final = "nvidia.com/gpu.replicas"
GFD_MEMORY_VALUE: Final = re.compile(r"[0-9]+")

SKIP_ANNOTATION: Final = "lwgpu.io/skip"
PROFILE_ANNOTATION: Final = "lwgpu.io/profile"
FROM_ANNOTATION: Final = "lwgpu.io/rewritten-from"
CONTAINER_ANNOTATION: Final = "lwgpu.io/container"
MEMORY_ANNOTATION: Final = "lwgpu.io/gpu-memory"

# The annotation of a mirror pod, the API's copy of a kubelet's static pod.
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"

# How Kubernetes reads its own boolean annotations: Go's strconv.ParseBool spellings, in Go's
# order (`lwgpu.io/skip` is read so: webhook.core.annotations).
BOOL_TRUE: Final = ("1", "t", "T", "TRUE", "true", "True")
BOOL_FALSE: Final = ("0", "f", "F", "FALSE", "false", "False")
