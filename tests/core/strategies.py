"""Hypothesis strategies for the objects the decision is fed: pods and every workload kind.

The generator mixes well-formed GPU asks with what users really send: quantities as ints,
strings, floats, garbage, None and lists; `resources: null`, `{}` or a list; missing `spec`;
label and annotation keys containing `/` and `~`; affinity, tolerations and sidecars. `OBJECTS`
draws a whole object, `POLICIES` the shipped policy or one on tainted nodes.
"""

from __future__ import annotations

from hypothesis import strategies as st

from tests.support.builders import WORKLOAD_KINDS, workload
from tests.support.policies import default_policy, tainted_policy

NAMES = ("cuda", "app", "sidecar", "a/b~c")
# Odd values users write; the decision must decide or deny with a message, never raise.
ODD_QUANTITIES = st.one_of(
    st.integers(-2, 20000),
    st.sampled_from(
        [
            "1",
            "2",
            "1.5Gi",
            "500M",
            "2e3",
            "1536Mi",
            "2048",
            "3000",
            "0",
            "-1",
            "0.5",
            "9Gi",
            "1e999",
            "2Gi ",
            "abc",
            "",
            "NaN",
            "1_000",
            "16276",
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.none(),
    st.booleans(),
    st.lists(st.integers(0, 3), max_size=2),
)
ODD_MAP = st.one_of(
    st.dictionaries(
        st.sampled_from(
            ["aliyun.com/gpu-mem", "nvidia.com/gpumem", "nvidia.com/gpu", "cpu", "memory"]
        ),
        ODD_QUANTITIES,
        max_size=3,
    ),
    st.none(),
    st.just([]),
    st.just("2"),
)
# Plausible asks, so that rewrites (not only refusals) are explored often.
GPU_MAP = st.one_of(
    st.fixed_dictionaries({"aliyun.com/gpu-mem": st.sampled_from([1, 2, "2", 4, 8, 9])}),
    st.fixed_dictionaries({"nvidia.com/gpumem": st.sampled_from([1000, "2048", 3000, 8192])}),
    st.fixed_dictionaries({"nvidia.com/gpu": st.sampled_from([1, "1", 0, 2])}),
    st.fixed_dictionaries(
        {"nvidia.com/gpu": st.just(1), "nvidia.com/gpumem": st.just(1536), "cpu": st.just("500m")}
    ),
)
RESOURCES = st.one_of(
    st.fixed_dictionaries({"limits": GPU_MAP}),
    st.fixed_dictionaries({"limits": GPU_MAP, "requests": GPU_MAP}),
    st.fixed_dictionaries({"requests": GPU_MAP}),
    st.fixed_dictionaries({}, optional={"limits": ODD_MAP, "requests": ODD_MAP}),
    st.none(),
    st.just({}),
    st.just([{"nvidia.com/gpu": 1}]),
)
CONTAINER = st.one_of(
    *(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(NAMES),
                "image": st.just("nvidia/cuda:12.4.1-base-ubuntu22.04"),
                **required,
            },
            optional={"restartPolicy": st.sampled_from(["Always", "Never"]), **optional},
        )
        for required, optional in (({"resources": RESOURCES}, {}), ({}, {"resources": RESOURCES}))
    )
)
CONTAINERS = st.one_of(
    st.lists(CONTAINER, min_size=1, max_size=2),
    st.lists(CONTAINER, min_size=1, max_size=3),
    st.lists(st.one_of(CONTAINER, st.none(), st.just("cuda")), max_size=2),
    st.none(),
)
CLASS_VALUES = st.sampled_from(
    ["1024MiB", "2048MiB", "4096MiB", "8192MiB", "16384MiB", "t4-4q", "x"]
)
LABEL_KEYS = st.sampled_from(
    ["aliyun.accelerator/nvidia_mem", "example.com/gpu-class", "a/b~c", "x~1y/z", "team"]
)
NODE_SELECTOR = st.one_of(
    st.dictionaries(LABEL_KEYS, st.one_of(CLASS_VALUES, st.integers()), max_size=3),
    st.none(),
    st.just(["aliyun.accelerator/nvidia_mem"]),
)
EXPRESSION = st.fixed_dictionaries(
    {
        "key": LABEL_KEYS,
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": st.one_of(st.lists(CLASS_VALUES, max_size=3), st.none()),
    }
)
AFFINITY = st.builds(
    lambda terms: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": exprs} for exprs in terms]
            }
        }
    },
    st.lists(st.lists(EXPRESSION, min_size=1, max_size=2), min_size=1, max_size=2),
)
ANNOTATIONS = st.one_of(
    st.none(),
    st.just({}),
    st.just({"a/b~c": "kept"}),
    st.fixed_dictionaries(
        {},
        optional={
            "lwgpu.io/gpu-memory": st.one_of(
                st.sampled_from(["1536Mi", "2Gi", "3000Mi", "1024", "9Gi", "abc", "0"]),
                st.integers(),
            ),
            "lwgpu.io/container": st.sampled_from((*NAMES, "missing")),
            "lwgpu.io/skip": st.sampled_from(["true", "false", "false"]),
        },
    ),
)
TOLERATIONS = st.one_of(
    st.none(),
    st.just([]),
    st.just([{"key": "example.com/lightweight-gpu", "operator": "Exists", "effect": "NoSchedule"}]),
)
SPEC = st.fixed_dictionaries(
    {"containers": CONTAINERS},
    optional={
        "initContainers": CONTAINERS,
        "nodeSelector": NODE_SELECTOR,
        "affinity": AFFINITY,
        "nodeName": st.just("node-1"),
        "tolerations": TOLERATIONS,
    },
)
POD = st.builds(
    lambda meta, spec: {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        **({} if spec is None else {"spec": spec}),
    },
    st.fixed_dictionaries({"name": st.just("gpu")}, optional={"annotations": ANNOTATIONS}),
    st.one_of(SPEC, SPEC, SPEC, st.none()),
)
OBJECTS = st.builds(lambda kind, pod: workload(*kind, pod), st.sampled_from(WORKLOAD_KINDS), POD)
POLICIES = st.sampled_from([default_policy(), tainted_policy()])
