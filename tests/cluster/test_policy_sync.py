"""The policy-sync sidecar as installed: the webhook's pods run it beside the server
(tools/cluster/kubelet.py), as the webhook's ServiceAccount, on the same policy volume.

A policy rolled out through the ConfigMap that adds a memory resource changes what the
apiserver refuses within seconds; a webhook that is down leaves the last applied check in
force. The probe asks `example.com/vram`, a name without "gpu": the webhook's matchConditions
never send it (deploy/base/webhook-scope.yaml), so only the check decides it, as it decides
any object sent around the webhook.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.cluster.admission_support import module_namespace
from tests.support.builders import container, gpu_mem, pod
from tests.support.cluster import Namespace
from tests.support.paths import SHIPPED_POLICY
from tools.waiting import wait_for
from webhook.compile.final_state import NAME

SHIPPED = SHIPPED_POLICY.read_text()
HAMI = "      nvidia.com/gpumem: Mi\n"
VRAM = SHIPPED.replace(HAMI, HAMI + "      example.com/vram: Mi\n")
PROBE = pod(container(limits={"example.com/vram": 512}))
REFUSAL = (
    "ValidatingAdmissionPolicy 'lwgpu-final-state' with binding 'lwgpu-final-state' denied"
    " request: lwgpu: spec.containers[0] (cuda) asks GPU memory example.com/vram=512"
)
ENFORCED_WITHIN_S = 10


def _sent(namespace: Namespace, obj: dict):
    return namespace.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
    )


@pytest.fixture(scope="module")
def vram_rolled_out(lwgpu) -> Iterator[tuple[Namespace, float]]:
    """The policy that adds example.com/vram rolled out through the ConfigMap; the seconds
    from the ConfigMap's replacement to the apiserver's first refusal of the probe. The
    shipped policy is rolled back at the end, and awaited as enforced."""
    with module_namespace(lwgpu.plane, "sync") as namespace:
        assert _sent(namespace, PROBE).returncode == 0  # no policy asks it yet
        began = time.monotonic()
        lwgpu.set_policies({"default.yaml": VRAM})
        wait_for(lambda: REFUSAL in _sent(namespace, PROBE).stderr, timeout=60, interval=0.1)
        seconds = time.monotonic() - began
        print(f"ConfigMap replaced -> the apiserver refuses example.com/vram: {seconds:.2f}s")
        try:
            yield namespace, seconds
        finally:
            lwgpu.set_policies({"default.yaml": SHIPPED})
            wait_for(lambda: _sent(namespace, PROBE).returncode == 0, timeout=60)


def _generation(lwgpu) -> int:
    stored = lwgpu.plane.kubectl("get", "validatingadmissionpolicy", NAME, "-o", "json").stdout
    generation: int = json.loads(stored)["metadata"]["generation"]
    return generation


def test_a_reload_that_adds_a_memory_resource_is_refused_within_seconds(lwgpu, vram_rolled_out):
    _, seconds = vram_rolled_out
    assert seconds < ENFORCED_WITHIN_S
    sidecar = lwgpu.webhook[0].containers[1]
    assert sidecar.name == "policy-sync"
    assert "applied the final-state check of policy generation 2" in sidecar.log.read_text()


def test_a_webhook_that_is_down_leaves_the_last_applied_check(lwgpu, vram_rolled_out):
    namespace, _ = vram_rolled_out
    applied = _generation(lwgpu)
    lwgpu.stop_webhook()  # the server and the sidecar, as when their node dies
    try:
        probe, memory = _sent(namespace, PROBE), _sent(namespace, pod(gpu_mem(2)))
        time.sleep(2)  # long past any informer delay: the check must still be the same
        still = _generation(lwgpu)
    finally:
        lwgpu.start_webhook()

    assert REFUSAL in probe.stderr
    assert "asks GPU memory aliyun.com/gpu-mem=2" in memory.stderr
    assert still == applied


def test_the_sidecar_fits_in_its_memory_request(lwgpu):
    """Its resident memory as it runs here (the Deployment requests 64Mi, limits 128Mi)."""
    rss = {}
    for running in lwgpu.webhook:
        [sidecar] = [c for c in running.containers if c.name == "policy-sync"]
        status = f"/proc/{sidecar.process.pid}/status"
        with open(status, encoding="ascii") as lines:
            kib = next(int(line.split()[1]) for line in lines if line.startswith("VmRSS:"))
        rss[running.name] = kib / 1024
    print(f"policy-sync resident memory (MiB): {rss}")
    assert all(mib < 64 for mib in rss.values()), rss
