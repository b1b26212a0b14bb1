"""Objects as the apiserver hands them to admission: quantities respelled, a Pod's requests
defaulted.

A webhook never sees a manifest as written. The apiserver decodes the request into its Go type,
which respells every quantity (`webhook.api.canonical`: `nvidia.com/gpumem: 3000` becomes
`3k`) and writes each resource list's keys in order (`encoding/json` sorts a map's keys), and
then defaults it (pkg/apis/core/v1/defaults.go and the generated zz_generated.defaults.go of
the core, apps and batch groups):

- `SetDefaults_ResourceList` rounds every resource list up to milli-units; the generated
  `SetObjectDefaults_Pod`, `SetObjectDefaults_PodTemplate`, `SetObjectDefaults_Deployment` and
  the rest call it on the `resources.limits` and `requests` of every container, init container
  and ephemeral container, on `overhead` and on the pod-level `resources`;
- `SetDefaults_Pod` copies each limit that a container or init container has no request for
  into its requests, in a Pod only ("we only want this defaulting semantic to take place on a
  v1.Pod and not a v1.PodTemplate"): a Deployment's template keeps its limits alone, and its
  pods get their requests when the ReplicaSet controller creates them.

After a mutating webhook's patch the apiserver decodes and defaults the object again
(k8s.io/apiserver, pkg/admission/plugin/webhook/mutating/dispatcher.go, `callAttrMutatingHook`),
so the same function also tells what is stored. The apiserver's other defaults (restartPolicy,
imagePullPolicy, pod-level requests from pod-level limits...) and its other quantities
(emptyDir sizeLimit, divisors, claim templates) are left as written: the decision reads none.
A value the apiserver would refuse is left as written too, for the decision to name the field.
"""

from __future__ import annotations

import copy
from typing import Any

from .canonical import canonical
from .quantity import QuantityError
from .types import KubeObject
from .workload import dig, group_of, template_path

_CONTAINERS = ("initContainers", "containers", "ephemeralContainers")
# SetDefaults_Pod copies limits to requests for these; ephemeral containers may ask no resources.
_DEFAULTED = ("initContainers", "containers")


def _decoded(value: object) -> object:
    try:
        return canonical(value, round_up_to_milli=True)
    except QuantityError:
        return value


def _decode_lists(holder: KubeObject, *keys: str) -> None:
    """Respell the resource lists `holder[key]` in place, keys in order."""
    for key in keys:
        values = holder.get(key)
        if isinstance(values, dict):
            holder[key] = {name: _decoded(values[name]) for name in sorted(values)}


def _default_requests(resources: KubeObject) -> None:
    """`SetDefaults_Pod`: each limit with no request becomes the request too."""
    limits, requests = resources.get("limits"), resources.get("requests")
    if not (isinstance(limits, dict) and limits) or not isinstance(requests, dict | None):
        return
    merged = {**limits, **(requests or {})}
    resources["requests"] = {name: merged[name] for name in sorted(merged)}


def as_decoded(obj: Any) -> Any:
    """`obj` as the apiserver decodes and defaults it before admission (a copy); an object with
    no pod template (`webhook.api.workload`) comes back as it is."""
    if not isinstance(obj, dict):
        return obj
    path = template_path(group_of(obj.get("apiVersion")), obj.get("kind"))
    if path is None:
        return obj
    decoded = copy.deepcopy(obj)
    spec = dig(decoded, (*path, "spec"))
    if not isinstance(spec, dict):
        return decoded
    for section in _CONTAINERS:
        items = spec.get(section)
        for container in items if isinstance(items, list) else ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            _decode_lists(resources, "limits", "requests")
            if not path and section in _DEFAULTED:
                _default_requests(resources)
    _decode_lists(spec, "overhead")
    if isinstance(spec.get("resources"), dict):
        _decode_lists(spec["resources"], "limits", "requests")
    return decoded
