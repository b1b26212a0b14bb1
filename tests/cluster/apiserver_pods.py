"""Hypothesis strategies for objects the apiserver itself admits, for comparing the rewrite in
the apiserver (the compiled MutatingAdmissionPolicy) with the webhook's on the real control
plane: Pods and the workloads around a pod template, whose containers ask GPU memory by a
resource or by the annotation, whole GPUs, HAMi's and ACK cGPU's shares, or nothing, in
limits, requests or both, beside sidecars, selectors, required node affinity on class
labels, a stale `lwgpu.io/profile`, `leaveAlone` selectors, `lwgpu.io/skip`, tolerations
and `nodeName`.

Unlike tests/core/strategies.py (what users might send, for the decision never to raise),
every value here is one the apiserver stores: what is compared is what each admission path
makes of an object both can see. A few asks that the webhook refuses (zero, two memory
resources, limits and requests that differ) are mixed in, to compare refusals too.

`ACK_PLACEMENTS` is a table beside them: the ways a pod may name the key of another
GPU-sharing system's nodes, and whether that leaves it alone (tests/core/test_mixed.py holds
the decision to it, the cluster tests the webhook and the compiled policies); `COMPANIONS`
another: shares of a GPU asked beside the memory.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.support.builders import IMAGE, workload

# The cloud's class labels and GPU Feature Discovery's (its memory an integer, which `Gt`
# compares).
CLASS_KEYS = (
    "aliyun.accelerator/nvidia_mem",
    "aliyun.accelerator/nvidia_name",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.product",
)
CLASS_VALUES = (
    "1024MiB",
    "2048MiB",
    "4096MiB",
    "8192MiB",
    "GRID-P4-2Q",
    "GRID-T4-4Q",
    "other",
    "2048",
    "8192",
    "GRID-T4-8Q",
)
NAMES = ("cuda", "app", "side", "warm")
ASKS = st.sampled_from(
    [
        {"aliyun.com/gpu-mem": "1"},
        {"aliyun.com/gpu-mem": "2"},
        {"aliyun.com/gpu-mem": "2"},
        {"nvidia.com/gpumem": "1536"},
        {"aliyun.com/gpu-mem": "4"},
        {"aliyun.com/gpu-mem": "9"},
        {"aliyun.com/gpu-mem": "0"},
        {"nvidia.com/gpumem": "1536"},
        {"nvidia.com/gpumem": "3000"},
        {"nvidia.com/gpumem": "2Gi"},
        {"nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "50"},
        {"nvidia.com/gpumem": "3000", "nvidia.com/gpumem-percentage": "50"},
        {"aliyun.com/gpu-mem": "2", "aliyun.com/gpu-core.percentage": "30"},
        {"nvidia.com/gpumem": "2048", "nvidia.com/gpu": "1"},
        {"aliyun.com/gpu-mem": "2", "nvidia.com/gpumem": "2048"},
        {"nvidia.com/gpu": "1"},
        {"nvidia.com/gpu": "2"},
        {"cpu": "100m"},
        {"cpu": "100m"},
        {},
        {},
    ]
)


@st.composite
def resources(draw: st.DrawFn, often: bool) -> dict:
    """An ask in limits (the usual way), in both, in requests alone, or limits and requests
    that differ (which the webhook refuses); not `often`, mostly none: a pod of several
    containers asking GPUs is refused for the GPUs it needs, and one such is enough."""
    ask = draw(ASKS) if often or draw(st.integers(0, 3)) == 0 else {}
    where = draw(st.sampled_from(["limits"] * 6 + ["both"] * 2 + ["requests", "differ"]))
    if not ask:
        return {}
    if where == "limits":
        return {"limits": dict(ask)}
    if where == "both":
        return {"limits": dict(ask), "requests": dict(ask)}
    if where == "requests":
        return {"requests": dict(ask)}
    return {"limits": dict(ask), "requests": dict(draw(ASKS)) or {"cpu": "10m"}}


def _container(name: str, init: bool, often: bool) -> st.SearchStrategy[dict]:
    extra = {"restartPolicy": st.sampled_from(["Always", "Always", "Never"])} if init else {}
    return st.fixed_dictionaries(
        {"name": st.just(name), "image": st.just(IMAGE), "resources": resources(often)},
        optional=extra,
    )


@st.composite
def containers(draw: st.DrawFn, init: bool) -> list[dict]:
    count = draw(st.sampled_from([0, 0, 1, 2] if init else [1, 1, 1, 2, 3]))
    prefix = "i" if init else "c"
    listed = [draw(_container(f"{prefix}{n}", init, n == 0 and not init)) for n in range(count)]
    for container in listed:
        if init and container.get("restartPolicy") == "Never":
            del container["restartPolicy"]  # a plain init container
    return listed


EXPRESSION = st.fixed_dictionaries(
    {
        "key": st.sampled_from([*CLASS_KEYS, "team", "ack.node.gpu.schedule"]),
        "operator": st.sampled_from(["In", "In", "NotIn", "Exists", "DoesNotExist", "Gt"]),
        "values": st.lists(st.sampled_from(CLASS_VALUES), min_size=1, max_size=2, unique=True),
    }
).map(
    lambda e: (
        {**e, "values": ["4000"]}
        if e["operator"] == "Gt"
        else {k: v for k, v in e.items() if k != "values"}
        if e["operator"] in ("Exists", "DoesNotExist")
        else e
    )
)
AFFINITY = st.lists(st.lists(EXPRESSION, min_size=1, max_size=2), min_size=1, max_size=2).map(
    lambda terms: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
            }
        }
    }
)
# A class's own label values mostly, another class's or none sometimes.
LABEL_VALUES = {
    CLASS_KEYS[0]: ["2048MiB", "4096MiB", "1024MiB", "other"],
    CLASS_KEYS[1]: ["GRID-P4-2Q", "GRID-T4-4Q", "other"],
    CLASS_KEYS[2]: ["2048", "8192", "2048MiB"],
    CLASS_KEYS[3]: ["GRID-T4-8Q", "GRID-T4-4Q", "other"],
    "team": ["ml"],
    "ack.node.gpu.schedule": ["cgpu"],
}
SELECTOR = st.lists(
    st.sampled_from([*CLASS_KEYS, *CLASS_KEYS, "team", "team", "ack.node.gpu.schedule"]),
    min_size=1,
    max_size=2,
    unique=True,
).flatmap(lambda keys: st.fixed_dictionaries({k: st.sampled_from(LABEL_VALUES[k]) for k in keys}))
ANNOTATIONS = st.sampled_from(
    [
        *([{}] * 8),
        {"lwgpu.io/gpu-memory": "1536Mi"},
        {"lwgpu.io/gpu-memory": "1536Mi"},
        {"lwgpu.io/gpu-memory": "2Gi", "lwgpu.io/container": "c0"},
        {"lwgpu.io/gpu-memory": "2Gi", "lwgpu.io/container": "c1"},
        {"lwgpu.io/gpu-memory": "3000Mi", "lwgpu.io/container": "i0"},
        {"lwgpu.io/gpu-memory": "9Gi"},
        {"lwgpu.io/gpu-memory": "100"},
        {"lwgpu.io/gpu-memory": "abc", "lwgpu.io/container": "missing"},
        {"lwgpu.io/profile": "GRID-P4-2Q"},
        {"lwgpu.io/profile": "GRID-T4-4Q", "lwgpu.io/gpu-memory": "4Gi"},
        {"lwgpu.io/skip": "true"},
        {"lwgpu.io/skip": "false"},
    ]
)
ACK = "ack.node.gpu.schedule"


def _requirement(operator: str, *values: str, key: str = ACK) -> dict:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


def _required(*terms: list[dict]) -> dict:
    """A required node affinity of these terms (ORed), each a list of requirements (ANDed)."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": selector}}


TEAM = _requirement("In", "ml", key="team")
# `leaveAlone.nodeSelectorKeys: [ack.node.gpu.schedule]` (the shipped policy's): pod spec
# fields around a pod asking GPU memory, and whether the pod is left alone, for every node it
# may be placed on carries the key (webhook.scheduling.required_keys), or decided.
ACK_PLACEMENTS: dict[str, tuple[dict, bool]] = {
    "nodeSelector": ({"nodeSelector": {ACK: "cgpu"}}, True),
    "In": ({"affinity": _required([_requirement("In", "cgpu")])}, True),
    "Exists": ({"affinity": _required([_requirement("Exists")])}, True),
    # the scheduler compares integers, and a node without the label fails both
    "Gt": ({"affinity": _required([_requirement("Gt", "0")])}, True),
    "Lt": ({"affinity": _required([_requirement("Lt", "5")])}, True),
    # kept OFF ACK's nodes: lwgpu's to decide
    "DoesNotExist": ({"affinity": _required([_requirement("DoesNotExist")])}, False),
    "NotIn": ({"affinity": _required([_requirement("NotIn", "cgpu")])}, False),
    "In, ANDed with another key": (
        {"affinity": _required([_requirement("In", "cgpu"), TEAM])},
        True,
    ),
    "Exists, ANDed with NotIn": (
        {"affinity": _required([_requirement("NotIn", "share"), _requirement("Exists")])},
        True,
    ),
    "In every term": (
        {"affinity": _required([_requirement("In", "cgpu")], [_requirement("Exists"), TEAM])},
        True,
    ),
    # terms are ORed: the second places the pod on nodes without the key
    "In one term of two": ({"affinity": _required([_requirement("In", "cgpu")], [TEAM])}, False),
    "Exists or DoesNotExist": (
        {"affinity": _required([_requirement("Exists")], [_requirement("DoesNotExist")])},
        False,
    ),
    "DoesNotExist beside another nodeSelector": (
        {"nodeSelector": {"team": "ml"}, "affinity": _required([_requirement("DoesNotExist")])},
        False,
    ),
}
# Shares of a GPU beside a memory ask, which the rewrite removes with it (the shipped
# policy's companionResources), and one no policy names, which stays (and is warned about).
COMPANIONS: dict[str, dict] = {
    "HAMi's core share": {"nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"},
    "HAMi's memory share": {"nvidia.com/gpumem": "3000", "nvidia.com/gpumem-percentage": "50"},
    "HAMi's both": {
        "nvidia.com/gpumem": "3000",
        "nvidia.com/gpumem-percentage": "50",
        "nvidia.com/gpucores": "30",
    },
    "ACK cGPU's core share": {"aliyun.com/gpu-mem": "2", "aliyun.com/gpu-core.percentage": "30"},
    "no policy's": {"aliyun.com/gpu-mem": "2", "example.com/gpu-slices": "2"},
}
TOLERATIONS = st.sampled_from(
    [
        [{"key": "vgpu", "operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "team", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}],
    ]
)


@st.composite
def pod_specs(draw: st.DrawFn) -> tuple[dict, dict]:
    """(pod template metadata, pod spec)."""
    spec: dict = {"containers": draw(containers(init=False))}
    init = draw(containers(init=True))
    if init:
        spec["initContainers"] = init
    optional = {
        "nodeSelector": SELECTOR,
        "affinity": AFFINITY,
        "tolerations": TOLERATIONS,
        "nodeName": st.just("node-0"),
        "schedulerName": st.just("hami-scheduler"),
    }
    for field, strategy in optional.items():
        if draw(st.integers(0, 19)) < (1 if field in ("nodeName", "schedulerName") else 3):
            spec[field] = draw(strategy)
    metadata: dict = {"labels": {"app": "gpu"}}
    annotations = draw(ANNOTATIONS)
    if annotations:
        metadata["annotations"] = annotations
    return metadata, spec


KINDS = st.sampled_from([("v1", "Pod")] * 4 + [("apps/v1", "Deployment"), ("batch/v1", "CronJob")])


@st.composite
def objects(draw: st.DrawFn) -> dict:
    """A Pod (most often) or a Deployment or CronJob around the drawn pod template."""
    api_version, kind = draw(KINDS)
    metadata, spec = draw(pod_specs())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu", **metadata}, "spec": spec}
    if kind == "Pod":
        return pod
    if kind == "CronJob":
        spec["restartPolicy"] = "Never"
    return workload(api_version, kind, pod)
