"""The names lwgpu reads and writes on Kubernetes objects: resources, node labels, annotations.

The node labels are the ones the lightweight-GPU cloud sets on its nodes (docs/CLI.md,
label-node) and that `label-node` writes where the cloud does not.
"""

from typing import Final

GPU_RESOURCE: Final = "nvidia.com/gpu"

COUNT_LABEL: Final = "aliyun.accelerator/nvidia_count"
MEM_LABEL: Final = "aliyun.accelerator/nvidia_mem"
NAME_LABEL: Final = "aliyun.accelerator/nvidia_name"

SKIP_ANNOTATION: Final = "lwgpu.io/skip"
PROFILE_ANNOTATION: Final = "lwgpu.io/profile"
FROM_ANNOTATION: Final = "lwgpu.io/rewritten-from"
CONTAINER_ANNOTATION: Final = "lwgpu.io/container"
MEMORY_ANNOTATION: Final = "lwgpu.io/gpu-memory"
