"""Test doubles for what cannot run here: the Kubernetes REST API (`kubeapi`, `kubeapi_store`),
kube-apiserver's webhook admission dispatcher (`apiserver_*`), NVML at the pynvml boundary
(`nvml`), the node inventory (`inventory`) and kubelet's volume updates (`kubelet`); and the
tests of the doubles themselves (`test_*`).
"""
