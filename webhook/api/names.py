"""The names lwgpu reads and writes on Kubernetes objects: resources, node labels, annotations.

The node labels are the ones the lightweight-GPU cloud sets on its nodes (docs/CLI.md,
label-node) and that `label-node` writes where the cloud does not.
"""

import re
from typing import Final

GPU_RESOURCE: Final = "nvidia.com/gpu"

COUNT_LABEL: Final = "aliyun.accelerator/nvidia_count"
MEM_LABEL: Final = "aliyun.accelerator/nvidia_mem"
NAME_LABEL: Final = "aliyun.accelerator/nvidia_name"
# A `nvidia_mem` value as nodes carry it, "<MiB>MiB" as nvidia-smi prints it: 2048MiB, 7611MiB.
MEM_VALUE: Final = re.compile(r"([0-9]+)MiB")

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
