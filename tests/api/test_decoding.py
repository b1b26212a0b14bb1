"""Objects as the apiserver hands them to admission (`webhook.api.decoding.as_decoded`).

The rules and where Kubernetes keeps them: pkg/apis/core/v1/defaults.go, `SetDefaults_Pod`
(a Pod's containers and init containers get each limit they have no request for as a request;
"only ... on a v1.Pod and not a v1.PodTemplate") and `SetDefaults_ResourceList` (every value
rounded up to milli-units), called by the generated `SetObjectDefaults_Pod`,
`SetObjectDefaults_Deployment` and the rest (zz_generated.defaults.go) on every container's,
init container's and ephemeral container's limits and requests, on overhead and on the
pod-level resources; each value respelled by apimachinery's `Quantity` (tests/api/
test_canonical.py), each resource list's keys in order, as Go's encoding/json writes a map.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.builders import WORKLOAD_KINDS, container, pod, workload
from webhook.api.decoding import as_decoded
from webhook.api.workload import dig, group_of, template_path

GPUMEM = "nvidia.com/gpumem"


def resources(obj: dict[str, Any], section: str = "containers", index: int = 0) -> Any:
    """The `resources` of one container of `obj`'s pod template."""
    path = template_path(group_of(obj["apiVersion"]), obj["kind"])
    assert path is not None
    return dig(obj, (*path, "spec"))[section][index]["resources"]


@pytest.mark.parametrize(
    ("limits", "requests", "stored"),
    [
        # Limits only: requests are the limits, as the apiserver spells them.
        (
            {GPUMEM: 3000},
            None,
            {"limits": {GPUMEM: "3k"}, "requests": {GPUMEM: "3k"}},
        ),
        (
            {"memory": "2048Mi", GPUMEM: 2048},
            None,
            {
                "limits": {"memory": "2Gi", GPUMEM: "2048"},
                "requests": {"memory": "2Gi", GPUMEM: "2048"},
            },
        ),
        # A request given is kept; only the missing ones are copied.
        (
            {GPUMEM: 3000, "cpu": 2},
            {"cpu": 0.5},
            {"limits": {"cpu": "2", GPUMEM: "3k"}, "requests": {"cpu": "500m", GPUMEM: "3k"}},
        ),
        # Both given alike: the two forms meet.
        (
            {GPUMEM: "3000"},
            {GPUMEM: "3k"},
            {"limits": {GPUMEM: "3k"}, "requests": {GPUMEM: "3k"}},
        ),
        # `requests: null` is no request map: Go makes one.
        ({"cpu": "1"}, "null", {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}),
        # Requests alone: nothing to copy.
        (None, {"cpu": "100m"}, {"requests": {"cpu": "100m"}}),
        # Sub-milli values are rounded up (SetDefaults_ResourceList).
        ({"cpu": "0.0001"}, None, {"limits": {"cpu": "1m"}, "requests": {"cpu": "1m"}}),
    ],
)
def test_pod_requests_default_to_limits(limits, requests, stored):
    """In a Pod, each container's limits without a request become requests too."""
    given = container(limits=limits, requests=None if requests == "null" else requests)
    if requests == "null":
        given["resources"]["requests"] = None
    assert resources(as_decoded(pod(given))) == stored


@pytest.mark.parametrize(("api_version", "kind"), [k for k in WORKLOAD_KINDS if k[1] != "Pod"])
def test_pod_templates_are_respelled_not_defaulted(api_version, kind):
    """A workload's pod template gets no requests: SetDefaults_Pod is for Pods alone."""
    obj = workload(api_version, kind, pod(container(limits={GPUMEM: 3000, "memory": "2048Mi"})))
    assert resources(as_decoded(obj)) == {"limits": {"memory": "2Gi", GPUMEM: "3k"}}


def test_every_container_kind_and_pod_resource_list():
    """Init containers are defaulted like containers; ephemeral containers, overhead and the
    pod-level resources are respelled only."""
    obj = pod(
        container(limits={GPUMEM: 3000}),
        init=(container("init", limits={"cpu": 0.25}),),
        ephemeralContainers=[{"name": "debug", "resources": {"limits": {"cpu": 1.0}}}],
        overhead={"memory": "1024Ki", "cpu": "250m"},
        resources={"limits": {"memory": "2048Mi"}},
    )
    decoded = as_decoded(obj)
    assert resources(decoded, "initContainers") == {
        "limits": {"cpu": "250m"},
        "requests": {"cpu": "250m"},
    }
    assert resources(decoded, "ephemeralContainers") == {"limits": {"cpu": "1"}}
    assert decoded["spec"]["overhead"] == {"cpu": "250m", "memory": "1Mi"}
    assert list(decoded["spec"]["overhead"]) == ["cpu", "memory"]  # Go writes map keys sorted
    assert decoded["spec"]["resources"] == {"limits": {"memory": "2Gi"}}


def test_values_the_apiserver_refuses_are_left_for_the_decision():
    """A value that is no quantity stays as written (and is copied as a request like any other),
    so the decision names the field; the apiserver would refuse the whole object."""
    decoded = as_decoded(pod(container(limits={GPUMEM: "lots", "cpu": True})))
    assert resources(decoded) == {
        "limits": {"cpu": True, GPUMEM: "lots"},
        "requests": {"cpu": True, GPUMEM: "lots"},
    }


def test_input_is_not_changed():
    obj = pod(container(limits={GPUMEM: 3000}))
    kept = copy.deepcopy(obj)
    as_decoded(obj)
    assert obj == kept


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}},
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {"tasks": []}},
        {"apiVersion": "v1", "kind": "Pod", "spec": "nonsense"},
        ["a", "list"],
        None,
    ],
)
def test_other_objects_come_back_as_they_are(obj):
    """Only a Pod or a workload's pod template is read; anything else is returned as is."""
    assert as_decoded(obj) == obj
