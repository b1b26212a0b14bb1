"""A policy rolled out as admins do it: the `lwgpu-policies` ConfigMap replaced through the API,
kubelet's AtomicWriter updating the webhook pods' volume, the server reloading it, and the next
`kubectl create` decided by the new policy."""

from __future__ import annotations

import json

from tests.support.builders import gpu_mem, pod
from tests.support.paths import SHIPPED_POLICY

EIGHT_Q = """\
  - name: GRID-P4-8Q
    memory: 8192Mi
    nodeSelector:
      aliyun.accelerator/nvidia_mem: 8192MiB
    nodeLabels:
      aliyun.accelerator/nvidia_name: GRID-P4-8Q
"""


def test_a_replaced_policy_configmap_decides_the_next_create(lwgpu, namespace):
    shipped = SHIPPED_POLICY.read_text()
    assert EIGHT_Q in shipped
    big = json.dumps(pod(gpu_mem(8)))
    try:
        lwgpu.set_policies({"default.yaml": shipped.replace(EIGHT_Q, "")})
        refused = namespace.kubectl("create", "--dry-run=server", "-f", "-", input=big, check=False)
        assert refused.returncode == 1, refused.stdout
        assert 'admission webhook "mutate.lwgpu.io" denied the request' in refused.stderr
        assert "8Gi" in refused.stderr or "8192" in refused.stderr
    finally:
        lwgpu.set_policies({"default.yaml": shipped})
    admitted = namespace.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=big)
    spec = json.loads(admitted.stdout)["spec"]
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert spec["nodeSelector"] == {"aliyun.accelerator/nvidia_mem": "8192MiB"}
