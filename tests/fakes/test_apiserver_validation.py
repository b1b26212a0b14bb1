"""The validation double (tests/fakes/apiserver_validation.py) refuses what kube-apiserver
refuses, with its words: pkg/apis/core/validation/validation.go (`ValidateResourceRequirements`,
`validateContainerResourceName`, `ValidateResourceQuantityValue`, `ValidateTolerations`),
apimachinery's `ValidateLabels` / `ValidateAnnotations`, and pkg/apis/batch/validation
(`ValidateJobSpecUpdate` -> `validatePodTemplateUpdate`). Cases follow those functions' own
tests (validation_test.go `TestValidateResourceRequirements`, `TestValidateTolerations`,
batch `TestValidateJobUpdate`).
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from tests.fakes.apiserver_harness import Apiserver
from tests.fakes.apiserver_quantity import QuantityError, parse
from tests.fakes.apiserver_validation import validate
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.kubectl import requires_kubectl

GPU, MEM = "nvidia.com/gpu", "aliyun.com/gpu-mem"
RES = "spec.containers[0].resources"


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("2", 2),
        (2, 2),
        ("1.5", Fraction(3, 2)),
        (1.5, Fraction(3, 2)),
        ("1536Mi", 1536 * 2**20),
        ("1Gi", 2**30),
        ("500m", Fraction(1, 2)),
        ("2k", 2000),
        ("1e3", 1000),
        ("-1", -1),
        (".5", Fraction(1, 2)),
    ],
)
def test_quantities_parse_exactly(written, value):
    assert parse(written) == value


@pytest.mark.parametrize("written", ["", "two", "1 Gi", "1GB", "0x10", True, None, [1]])
def test_not_quantities(written):
    with pytest.raises(QuantityError):
        parse(written)


def resources_pod(limits=None, requests=None) -> dict:
    return pod(container(limits=limits, requests=requests))


# (case, object, the errors)
RESOURCES = [
    ("whole GPUs, equal", resources_pod({GPU: "1"}, {GPU: "1"}), []),
    ("a limit alone", resources_pod({GPU: "1"}), []),
    ("GPU memory in GiB", resources_pod({MEM: 2}, {MEM: 2}), []),
    (
        "a fraction of an extended resource",
        resources_pod({MEM: "1.5"}),
        [f'{RES}.limits[{MEM}]: Invalid value: "1.5": must be an integer'],
    ),
    (
        "extended request below its limit",
        resources_pod({GPU: "2"}, {GPU: "1"}),
        [f'{RES}.requests: Invalid value: "1": must be equal to {GPU} limit of 2'],
    ),
    (
        "extended request without a limit",
        resources_pod(None, {GPU: "1"}),
        [f"{RES}.limits: Required value: Limit must be set for non overcommitable resources"],
    ),
    ("cpu request below its limit", resources_pod({"cpu": "2"}, {"cpu": "1"}), []),
    ("cpu request alone", resources_pod(None, {"cpu": "500m"}), []),
    (
        "cpu request above its limit",
        resources_pod({"cpu": "1"}, {"cpu": "2"}),
        [f'{RES}.requests: Invalid value: "2": must be less than or equal to cpu limit of 1'],
    ),
    (
        "hugepages must be equal too",
        resources_pod({"hugepages-2Mi": "4Mi", "memory": "1Gi"}, {"hugepages-2Mi": "2Mi"}),
        [f'{RES}.requests: Invalid value: "2Mi": must be equal to hugepages-2Mi limit of 4Mi'],
    ),
    (
        "a name without a domain",
        resources_pod({"gpu": "1"}),
        [
            f'{RES}.limits[gpu]: Invalid value: "gpu": must be a standard resource type or '
            "fully qualified",
            f'{RES}.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers',
        ],
    ),
    (
        "a negative quantity",
        resources_pod({"memory": "-1"}),
        [f'{RES}.limits[memory]: Invalid value: "-1": must be greater than or equal to 0'],
    ),
    ("the same amount spelt two ways", resources_pod({GPU: "1"}, {GPU: "1000m"}), []),
]

TOL = "spec.tolerations[0]"
# (case, toleration, the errors)
TOLERATIONS = [
    ("exists", {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, []),
    ("equal", {"key": "gpu", "operator": "Equal", "value": "true"}, []),
    ("empty operator is Equal", {"key": "gpu", "value": "true"}, []),
    ("empty key with Exists", {"operator": "Exists"}, []),
    (
        "NoExecute with seconds",
        {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        [],
    ),
    (
        "Exists with a value",
        {"key": "gpu", "operator": "Exists", "value": "true"},
        [
            f'{TOL}.operator: Invalid value: {{"key": "gpu", "operator": "Exists", "value": '
            "\"true\"}: value must be empty when `operator` is 'Exists'"
        ],
    ),
    (
        "seconds without NoExecute",
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
        [
            f"{TOL}.effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
            "`tolerationSeconds` is set"
        ],
    ),
    (
        "an operator in lower case",
        {"key": "gpu", "operator": "exists"},
        [f'{TOL}.operator: Unsupported value: "exists": supported values: "Equal", "Exists"'],
    ),
    (
        "empty key with Equal",
        {"operator": "Equal", "value": "x"},
        [
            f'{TOL}.operator: Invalid value: "Equal": operator must be Exists when `key` is '
            'empty, which means "match all values and all keys"'
        ],
    ),
    (
        "an unknown effect",
        {"key": "gpu", "operator": "Exists", "effect": "NoRun"},
        [
            f'{TOL}.effect: Unsupported value: "NoRun": supported values: "NoSchedule", '
            '"PreferNoSchedule", "NoExecute"'
        ],
    ),
    ("a bad key", {"key": "a b", "operator": "Exists"}, ["name part must consist of"]),
    ("a bad value", {"key": "gpu", "value": "a b"}, ["a valid label must consist of"]),
]

LABELS = [
    ("a selector", pod(node_selector={"aliyun.accelerator/nvidia_mem": "2048MiB"}), []),
    (
        "a selector key with a space",
        pod(node_selector={"nvidia mem": "2048MiB"}),
        ['spec.nodeSelector: Invalid value: "nvidia mem": name part must consist of'],
    ),
    (
        "a selector value with a slash",
        pod(node_selector={"mem": "2048/MiB"}),
        ['spec.nodeSelector: Invalid value: "2048/MiB": a valid label must consist of'],
    ),
    (
        "an upper-case prefix",
        pod(node_selector={"Example.com/gpu": "yes"}),
        ['spec.nodeSelector: Invalid value: "Example.com/gpu": prefix part a lowercase RFC'],
    ),
    (
        "a selector value of 64 characters",
        pod(node_selector={"mem": "a" * 64}),
        ["must be no more than 63 characters"],
    ),
    ("annotation keys ignore case", pod(annotations={"Example.com/Profile": "x"}), []),
    (
        "an annotation key with two slashes",
        pod(annotations={"lwgpu.io/a/b": "x"}),
        ['metadata.annotations: Invalid value: "lwgpu.io/a/b": a qualified name must'],
    ),
    (
        "a template annotation",
        workload("apps/v1", "Deployment", pod(annotations={"bad key": "x"})),
        ['spec.template.annotations: Invalid value: "bad key": name part must'],
    ),
    (
        "a CronJob's template selector",
        workload("batch/v1", "CronJob", pod(node_selector={"bad key": "x"})),
        ['spec.jobTemplate.spec.template.spec.nodeSelector: Invalid value: "bad key"'],
    ),
]


def toleration_pod(toleration: dict) -> dict:
    return pod(tolerations=[toleration])


CASES = [
    *RESOURCES,
    *[(name, toleration_pod(t), errors) for name, t, errors in TOLERATIONS],
    *LABELS,
]


@pytest.mark.parametrize(("obj", "errors"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validation(obj, errors):
    found = validate(obj)
    assert len(found) == len(errors), found
    assert all(expected in error for error, expected in zip(found, errors, strict=True))


def test_template_resources_are_validated_like_a_pods():
    obj = workload("apps/v1", "Deployment", resources_pod({GPU: "2"}, {GPU: "1"}))
    assert validate(obj) == [
        'spec.template.spec.containers[0].resources.requests: Invalid value: "1": must be '
        f"equal to {GPU} limit of 2"
    ]


JOB = workload("batch/v1", "Job", pod(gpu_mem(2)))


def changed(obj: dict, change) -> dict:
    obj = copy.deepcopy(obj)
    change(obj)
    return obj


def suspended(obj: dict, started: bool = False) -> dict:
    obj = changed(obj, lambda o: o["spec"].update(suspend=True))
    if started:
        obj["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    return obj


def select(obj: dict) -> None:
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"aliyun.accelerator/nvidia_mem": "2048MiB"}


def ask_more(obj: dict) -> None:
    obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][MEM] = 4


def relabel(obj: dict) -> None:
    obj["metadata"]["labels"] = {"team": "ml"}


def empty_annotations(obj: dict) -> None:
    obj["spec"]["template"].setdefault("metadata", {})["annotations"] = {}


# (case, old Job, change, immutable)
JOB_UPDATES = [
    ("Job label", JOB, relabel, False),
    ("parallelism", JOB, lambda o: o["spec"].update(parallelism=2), False),
    ("an empty map for an absent one", JOB, empty_annotations, False),
    ("template resources", JOB, ask_more, True),
    ("template nodeSelector of a running Job", JOB, select, True),
    ("nodeSelector of a suspended Job that never started", suspended(JOB), select, False),
    ("nodeSelector of a suspended Job that ran", suspended(JOB, True), select, True),
    ("resources of a suspended Job that never started", suspended(JOB), ask_more, True),
]


@pytest.mark.parametrize(
    ("old", "change", "immutable"),
    [c[1:] for c in JOB_UPDATES],
    ids=[c[0] for c in JOB_UPDATES],
)
def test_a_jobs_pod_template_is_immutable(old, change, immutable):
    errors = validate(changed(old, change), old)
    assert [e.split(":")[0] for e in errors] == (["spec.template"] if immutable else [])
    assert all(e.endswith(": field is immutable") for e in errors)
    assert validate(changed(old, change)) == []  # a CREATE of the same Job is valid


def make_invalid(obj: dict) -> list:
    """Another webhook's patch: a request below its extended limit (and a second error)."""
    return [
        {"op": "add", "path": "/spec/containers/0/resources/requests", "value": {GPU: "1"}},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"a b": "c"}},
    ]


@requires_kubectl
def test_the_dispatcher_refuses_an_invalid_final_object_as_the_apiserver_words_it():
    apiserver = Apiserver([], {}, validator=validate).with_local_webhook("bad", make_invalid)
    result = apiserver.admit(resources_pod({GPU: "2"}), "default")
    assert not result.allowed and len(result.invalid) == 2
    assert result.message.startswith(
        'Pod "gpu" is invalid: [spec.containers[0].resources.requests: Invalid value: "1": '
        f"must be equal to {GPU} limit of 2, spec.nodeSelector: Invalid value: "
    )


def test_the_dispatcher_validates_an_update_against_the_old_object():
    apiserver = Apiserver([], {}, validator=validate)
    refused = apiserver.admit(changed(JOB, ask_more), "default", operation="UPDATE", old=JOB)
    assert not refused.allowed
    assert refused.message.startswith('Job.batch "gpu" is invalid: spec.template: Invalid value')
    relabelled = apiserver.admit(changed(JOB, relabel), "default", operation="UPDATE", old=JOB)
    assert relabelled.allowed and relabelled.invalid == []
