"""The node agent (`label-node`, a DaemonSet): NVML reads the GPU, the labeller writes labels.

The only package that imports `pynvml`. Imports: `webhook.kube`, `webhook.api`.
"""
