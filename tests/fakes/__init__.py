"""Test doubles for what has no real counterpart here: NVML at the pynvml boundary (`nvml`: no
GPU on these machines) and lwgpu's own node inventory at its reading boundary (`inventory`,
held to the real NodeInventory by tests/kube/test_fake_inventory.py); `test_nvml` tests the
NVML double itself. Kubernetes components are never imitated: tests run against the real ones
(tests/cluster/, tools/cluster/).
"""
