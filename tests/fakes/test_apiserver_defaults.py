"""The defaulting double (tests/fakes/apiserver_defaults.py) does what `SetDefaults_Pod`
(pkg/apis/core/v1/defaults.go) does to resources, and the dispatcher defaults before the
webhooks and again after each patch, as mutating/dispatcher.go `callAttrMutatingHook` does.
"""

from __future__ import annotations

import pytest

from tests.fakes.apiserver_defaults import default, set_defaults_pod
from tests.fakes.apiserver_harness import Apiserver
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.kubectl import requires_kubectl

MEM = "aliyun.com/gpu-mem"

# (case, container, the resources it has after defaulting)
CONTAINERS = [
    ("limits copied", gpu_mem(2), {"limits": {MEM: 2}, "requests": {MEM: 2}}),
    (
        "a request kept",
        container(limits={"cpu": "2", MEM: 2}, requests={"cpu": "1"}),
        {"limits": {"cpu": "2", MEM: 2}, "requests": {"cpu": "1", MEM: 2}},
    ),
    (
        "a different request kept",
        container(limits={MEM: 4}, requests={MEM: 2}),
        {"limits": {MEM: 4}, "requests": {MEM: 2}},
    ),
    ("requests alone", container(requests={"cpu": "1"}), {"requests": {"cpu": "1"}}),
    ("no resources", container(), None),
]


@pytest.mark.parametrize(
    ("given", "resources"), [c[1:] for c in CONTAINERS], ids=[c[0] for c in CONTAINERS]
)
@pytest.mark.parametrize("section", ["containers", "initContainers"])
def test_a_pod_gets_requests_from_limits(given, resources, section):
    obj = pod(**{"containers": [container("main")], section: [given]})
    defaulted = set_defaults_pod(obj)
    assert defaulted["spec"][section][-1].get("resources") == resources
    assert obj["spec"][section][-1] == given  # the input is left as it was


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "Job"])
def test_a_pod_template_is_not_defaulted(kind):
    """Only a v1.Pod, never a v1.PodTemplate: a workload's template keeps limits alone."""
    obj = workload("batch/v1" if kind == "Job" else "apps/v1", kind, pod(gpu_mem(2)))
    assert default(obj) == obj
    assert "requests" not in default(obj)["spec"]["template"]["spec"]["containers"][0]["resources"]


def test_a_pod_is_defaulted_by_kind():
    assert default(pod(gpu_mem(2)))["spec"]["containers"][0]["resources"]["requests"] == {MEM: 2}


def seen_by(calls: list) -> object:
    """A local webhook that records the object it was sent and adds a container with limits."""

    def add_container(obj: dict) -> list:
        calls.append(obj)
        return [{"op": "add", "path": "/spec/containers/-", "value": gpu_mem(1, "sidecar")}]

    return add_container


@requires_kubectl
def test_the_dispatcher_defaults_before_the_webhooks_and_after_each_patch():
    seen: list[dict] = []
    apiserver = Apiserver([], {}, defaulter=default).with_local_webhook("add", seen_by(seen))
    result = apiserver.admit(pod(gpu_mem(2)), "default")
    [sent] = seen
    assert sent["spec"]["containers"][0]["resources"]["requests"] == {MEM: 2}
    assert result.allowed and result.called == ["add"]
    assert result.obj["spec"]["containers"][1]["resources"] == {
        "limits": {MEM: 1},
        "requests": {MEM: 1},
    }


@requires_kubectl
def test_without_a_defaulter_the_dispatcher_leaves_the_object_as_sent():
    seen: list[dict] = []
    apiserver = Apiserver([], {}).with_local_webhook("add", seen_by(seen))
    result = apiserver.admit(pod(gpu_mem(2)), "default")
    assert "requests" not in seen[0]["spec"]["containers"][0]["resources"]
    assert "requests" not in result.obj["spec"]["containers"][1]["resources"]
