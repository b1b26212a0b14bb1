"""Which requests reach the webhook: the CEL matchConditions of the webhook configurations that
`kubectl kustomize deploy/` renders (their rules and namespaceSelector: test_manifests.py).

matchConditions run in cel-python, a real CEL implementation, bound as kube-apiserver binds
them: `object`, `oldObject` (null on CREATE) and `request`. The apiserver decodes built-in kinds
into typed Go structs before CEL sees them, so a YAML null is an absent field there;
`as_apiserver_sees` drops nulls the same way, and `has()` follows cel-go
(tests/fakes/apiserver_cel.py). The decision engine is the oracle: an object that does not match
is never sent, so every object it would rewrite or refuse must match.
"""

from __future__ import annotations

import celpy
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes.apiserver_cel import as_apiserver_sees, program
from tests.support.builders import WORKLOAD_KINDS, container, pod, workload
from tests.support.deploy import WEBHOOKS, find
from tests.support.kubectl import requires_kubectl
from tests.support.paths import CORPUS, REPO
from webhook.core.decision import decide
from webhook.policy import load_policies

POLICY = load_policies(REPO / "policies/default.yaml").for_namespace("default")


def sent(obj: dict, *, operation: str = "CREATE", old: dict | None = None) -> bool:
    """Whether both webhooks' matchConditions let the apiserver call for `obj`.

    Fails the test when a condition does not give a boolean (an error, which would make the
    apiserver apply failurePolicy), or when the two webhooks disagree.
    """
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    metadata = obj.get("metadata") or {}
    request = {
        "uid": "0a8f6c4e",
        "operation": operation,
        "namespace": "default",
        "kind": {"group": group, "version": version, "kind": obj.get("kind", "")},
        "name": metadata.get("name", ""),
        "userInfo": {"username": "alice"},
        "dryRun": False,
    }
    activation = {
        "object": celpy.json_to_cel(as_apiserver_sees(obj)),
        "oldObject": celpy.json_to_cel(old and as_apiserver_sees(old)),
        "request": celpy.json_to_cel(request),
    }
    verdicts = set()
    for kind, name, _, _ in WEBHOOKS:
        results = [
            program(c["expression"]).evaluate(activation)
            for c in find(kind, name)["webhooks"][0]["matchConditions"]
        ]
        assert all(isinstance(r, celpy.celtypes.BoolType) for r in results), results
        verdicts.add(all(results))
    [verdict] = verdicts
    return verdict


def corpus_objects(file_name: str) -> list[dict]:
    """The Kubernetes objects of one corpus file (documents without a kind are skipped)."""
    docs = yaml.safe_load_all((CORPUS / file_name).read_text())
    return [d for d in docs if isinstance(d, dict) and "kind" in d]


def label(obj: dict) -> str:
    """Kind/name, or Kind/generateName for objects named by the apiserver."""
    metadata = obj.get("metadata") or {}
    return f"{obj['kind']}/{metadata.get('name') or metadata.get('generateName')}"


CORPUS_FILES = sorted(p.name for p in CORPUS.glob("*.y*ml")) if CORPUS.is_dir() else []
# The objects of each corpus file that reach the webhook; no object of any other file is sent
# (the guestbook frontend, cockroachdb, the daemonset example, GPU device plugins...).
# Resource names containing "gpu" match even where the policy ignores them (metax sgpu,
# volcano vgpu, nvidia.com/gpu-10gb): the server then allows them unchanged. MIG resources
# (nvidia.com/mig-*), KAI's gpu-fraction annotations, a placeholder resource name and the
# volcano batch.volcano.sh Job (its pods sit under spec.tasks) are not GPU asks here.
SENT = {
    "AliyunContainerService__ai-models-on-ack__aigc__fastchat__fastchat-gpu.yaml": [
        "Deployment/fastchat"
    ],
    "AliyunContainerService__ai-models-on-ack__llm__lmdeploy__yamls__deploy.yaml": [
        "Deployment/lmdeploy"
    ],
    "AliyunContainerService__gpushare-device-plugin__demo__binpack-1__binpack-1.yaml": [
        "StatefulSet/binpack-1"
    ],
    "AliyunContainerService__gpushare-device-plugin__demo__binpack-1__job.yaml": ["Job/gpu-job"],
    "AliyunContainerService__gpushare-scheduler-extender__samples__1.yaml": [
        "Deployment/binpack-1"
    ],
    "AliyunContainerService__gpushare-scheduler-extender__samples__4.yaml": [
        "Deployment/binpack-4"
    ],
    "GoogleCloudPlatform__kubernetes-engine-samples__ai-ml__llm-serving-gemma__vllm__"
    "vllm-2b-it.yaml": ["Deployment/vllm-gemma-deployment"],
    "GoogleCloudPlatform__kubernetes-engine-samples__batch__kueue-intro__job-team-a.yaml": [
        "Job/sample-job-team-a-"
    ],
    "NVIDIA__gpu-operator__tests__gpu-pod.yaml": ["Pod/gpu-operator-test"],
    "NVIDIA__gpu-operator__tests__plugin-test.yaml": ["Deployment/nvidia-plugin-test"],
    "NVIDIA__k8s-device-plugin__testdata__job-1.yaml": ["Job/j-e2e-1"],
    "Project-HAMi__HAMi__benchmarks__deployments__job-on-hami.yml": ["Job/ai-benchmark-on-hami"],
    "Project-HAMi__HAMi__examples__metax__sgpu__allocate_vmemory_MiB.yaml": ["Pod/gpu-pod"],
    "Project-HAMi__HAMi__examples__nvidia__default_use.yaml": ["Pod/gpu-pod"],
    "Project-HAMi__HAMi__examples__nvidia__default_use_legacy.yaml": ["Pod/gpu-pod"],
    "Project-HAMi__HAMi__examples__nvidia__dynamic_mig_example.yaml": ["Pod/gpu-pod"],
    "Project-HAMi__HAMi__examples__nvidia__example.yaml": ["Deployment/cuda-sample-vector-add"],
    "Project-HAMi__HAMi__examples__nvidia__specify_card_type_to_use.yaml": ["Pod/gpu-pod"],
    "Project-HAMi__HAMi__examples__nvidia__use_exclusive_card.yaml": ["Pod/gpu-pod1"],
    "Project-HAMi__HAMi__examples__nvidia__use_memory_fraction.yaml": ["Pod/gpu-pod"],
    "Project-HAMi__HAMi__examples__nvidia__use_sharing_card.yaml": ["Pod/gpu-pod1", "Pod/gpu-pod2"],
    "Project-HAMi__HAMi__examples__nvidia__vllm_cross_vgpu.yaml": ["Deployment/vllm-cross-vgpu"],
    "Project-HAMi__volcano-vgpu-device-plugin__examples__gpu-share.yml": ["Pod/pod1"],
    "Project-HAMi__volcano-vgpu-device-plugin__examples__vgpu-case01.yml": ["Pod/test1"],
    "Project-HAMi__volcano-vgpu-device-plugin__examples__vgpu-case02.yml": ["Pod/pod1"],
    "Project-HAMi__volcano-vgpu-device-plugin__examples__vgpu-case03.yml": ["Pod/gpu-pod12"],
    "Project-HAMi__volcano-vgpu-device-plugin__examples__vgpu-deployment.yaml": [
        "Deployment/resnet101-deployment"
    ],
    "kai-scheduler__KAI-Scheduler__docs__quickstart__pods__gpu-pod.yaml": ["Pod/gpu-pod"],
    "kubernetes__examples__AI__vllm-deployment__vllm-deployment.yaml": [
        "Deployment/vllm-gemma-deployment"
    ],
    "milvus-io__milvus__ci__jenkins__pod__milvus-gpu-version-build-env-pod.yaml": [
        "Pod/milvus-gpu-build-env"
    ],
    "milvus-io__milvus__ci__jenkins__pod__milvus-gpu-version-ubuntu18.04-build-env-pod.yaml": [
        "Pod/milvus-gpu-build-env"
    ],
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__mps__patch.yaml": [
        "Deployment/benchmarks-client"
    ],
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__ts__patch.yaml": [
        "Deployment/benchmarks-client"
    ],
}
skip_without_corpus = pytest.mark.skipif(not CORPUS_FILES, reason=f"no corpus at {CORPUS}")


@requires_kubectl
@pytest.mark.parametrize("file_name", CORPUS_FILES)
def test_corpus_objects_sent_to_the_webhook(file_name):
    objects = corpus_objects(file_name)
    assert [label(o) for o in objects if sent(o)] == SENT.get(file_name, [])


@requires_kubectl
@pytest.mark.parametrize("file_name", CORPUS_FILES)
def test_every_object_the_decision_acts_on_is_sent(file_name):
    acted = [label(o) for o in corpus_objects(file_name) if decide(o, POLICY).outcome != "skipped"]
    assert set(acted) <= set(SENT.get(file_name, []))


@requires_kubectl
@skip_without_corpus
def test_the_decision_acts_on_part_of_the_corpus():
    """Keeps the test above meaningful: the decision engine does rewrite or refuse some."""
    acted = [
        o for f in CORPUS_FILES for o in corpus_objects(f) if decide(o, POLICY).outcome != "skipped"
    ]
    assert len(acted) >= 10


GPU = {"nvidia.com/gpu": "1"}
MEMORY_ANNOTATION = {"lwgpu.io/gpu-memory": "1536Mi"}
CASES = [  # (id, object, sent)
    ("gpu limit", pod(container("main", limits=GPU)), True),
    ("gpushare request only", pod(container("main", requests={"aliyun.com/gpu-mem": 2})), True),
    ("HAMi gpumem", pod(container("main", limits={"nvidia.com/gpumem": 3000})), True),
    (
        "init container only",
        pod(container("main", resources={}), init=(container("main", limits=GPU),)),
        True,
    ),
    ("annotation only", pod({"name": "main"}, annotations=MEMORY_ANNOTATION), True),
    (
        "annotation, no spec",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "annotations": MEMORY_ANNOTATION},
        },
        True,
    ),
    (
        "another gpu-memory annotation",
        pod({"name": "main"}, annotations={"gpu-memory": "2000"}),
        False,
    ),
    ("cpu and memory only", pod(container("main", limits={"cpu": "1", "memory": "1Gi"})), False),
    ("MIG slice", pod(container("main", limits={"nvidia.com/mig-1g.5gb": 1})), False),
    ("no spec", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}, False),
    (
        "empty spec",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
        False,
    ),
    ("no containers", pod(containers=[]), False),
    ("no resources", pod({"name": "main"}), False),
    ("empty resources", pod(container("main", resources={})), False),
    ("null resources", pod({"name": "main", "resources": None}), False),
    ("null limits", pod(container("main", resources={"limits": None, "requests": None})), False),
    ("null container", pod(containers=[None]), False),
    ("empty object", {}, False),
    (
        "no metadata",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {"containers": [container("main", limits=GPU)]},
        },
        True,
    ),
    (
        "deployment",
        workload(
            "apps/v1", "Deployment", {"spec": {"containers": [container("main", limits=GPU)]}}
        ),
        True,
    ),
    (
        "deployment annotation",
        workload(
            "apps/v1", "Deployment", {"metadata": {"annotations": MEMORY_ANNOTATION}, "spec": {}}
        ),
        True,
    ),
    (
        "deployment without gpu",
        workload(
            "apps/v1",
            "Deployment",
            {"spec": {"containers": [container("main", requests={"cpu": "100m"})]}},
        ),
        False,
    ),
    ("deployment template without spec", workload("apps/v1", "Deployment", {}), False),
    (
        "replicationcontroller",
        workload(
            "v1",
            "ReplicationController",
            {"spec": {"initContainers": [container("main", requests=GPU)]}},
        ),
        True,
    ),
    (
        "cronjob",
        workload(
            "batch/v1",
            "CronJob",
            {"spec": {"containers": [container("main", limits={"aliyun.com/gpu-mem": 1})]}},
        ),
        True,
    ),
    (
        "cronjob annotation",
        workload("batch/v1", "CronJob", {"metadata": {"annotations": MEMORY_ANNOTATION}}),
        True,
    ),
    (
        "cronjob without job spec",
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "c"},
            "spec": {"jobTemplate": {}},
        },
        False,
    ),
]


@requires_kubectl
@pytest.mark.parametrize("obj, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hand_written_objects(obj, expected):
    assert sent(obj) is expected


@requires_kubectl
def test_update_is_judged_on_the_new_object():
    old = workload("apps/v1", "Deployment", {"spec": {"containers": [container(limits=GPU)]}})
    new = workload("apps/v1", "Deployment", {"spec": {"containers": [container(resources={})]}})
    assert (sent(new, operation="UPDATE", old=old), sent(old, operation="UPDATE", old=new)) == (
        False,
        True,
    )


NAMES = [
    "nvidia.com/gpu",
    "aliyun.com/gpu-mem",
    "nvidia.com/gpumem",
    "cpu",
    "memory",
    "nvidia.com/mig-1g.5gb",
    "example.com/fpga",
]
resource_maps = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(NAMES), st.sampled_from(["1", 2, "2Gi", "1536Mi", "0.5"]), max_size=3
    ),
)
containers = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["a", "b"])},
        optional={
            "resources": st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {}, optional={"limits": resource_maps, "requests": resource_maps}
                ),
            )
        },
    ),
    max_size=3,
)
templates = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries(
            {},
            optional={
                "annotations": st.dictionaries(
                    st.sampled_from(["lwgpu.io/gpu-memory", "lwgpu.io/skip", "gpu-memory"]),
                    st.sampled_from(["1536Mi", "true", "x"]),
                    max_size=2,
                )
            },
        ),
        "spec": st.fixed_dictionaries(
            {}, optional={"containers": containers, "initContainers": containers}
        ),
    },
)
# Pods are drawn apart, from the templates themselves.
KINDS = [kind for kind in WORKLOAD_KINDS if kind != ("v1", "Pod")]
objects = st.one_of(
    templates.map(lambda t: {"apiVersion": "v1", "kind": "Pod", **t}),
    st.tuples(st.sampled_from(KINDS), templates).map(lambda kt: workload(*kt[0], kt[1])),
)


@requires_kubectl
@settings(max_examples=150, deadline=None)
@given(objects)
def test_whatever_the_decision_acts_on_is_sent(obj):
    """Never an error, and never a GPU object left out (sent() fails on a non-boolean)."""
    matched = sent(obj)
    assert matched or decide(obj, POLICY).outcome == "skipped"
