"""Which requests reach the webhook, decided by the real kube-apiserver from the installed
webhook configurations: their rules (operations and resources), their namespaceSelector and
the CEL matchConditions of deploy/base/webhook-scope.yaml, evaluated by the apiserver's own CEL
on the object as it decoded it (a YAML null is an absent field there).

"Sent" is what the webhook's pods logged (tests/cluster/admission_support.py). Creates are
server-side dry runs, so nothing is stored; updates and deletes act on objects the test stored
in its own namespace.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cluster.admission_support import Calls, module_namespace, restricted
from tests.support.builders import WORKLOAD_KINDS, container, pod, workload
from tests.support.paths import SHIPPED_POLICY
from webhook.core.decision import decide
from webhook.files import load_policies

# The shipped install calls only /mutate (the validating webhook is an option).
SENT = ["mutate"]
GPU = {"nvidia.com/gpu": "1"}
MEMORY_ANNOTATION = {"lwgpu.io/gpu-memory": "1536Mi"}
GPU_MEM_POD = pod(container(limits={"aliyun.com/gpu-mem": 2}))
CPU_POD = pod(container(limits={"cpu": "1"}))
ANNOTATED_POD = pod(container(), annotations=MEMORY_ANNOTATION)


def deployment(template_pod: dict) -> dict:
    """A Deployment of `template_pod` with no replicas: no controller makes pods of it, so
    the only requests in the namespace are the test's own."""
    obj = workload("apps/v1", "Deployment", template_pod)
    obj["spec"]["replicas"] = 0
    obj["spec"]["template"].setdefault("metadata", {})["labels"] = {"app": "gpu"}
    return obj


GPU_DEPLOYMENT, CPU_DEPLOYMENT = deployment(GPU_MEM_POD), deployment(CPU_POD)
# A Job that never starts: a suspended one may still change its template's scheduling
# directives (pkg/apis/batch/validation, ValidateJobSpecUpdate), nothing else of it.
RUN_ONCE = pod(container(limits={"aliyun.com/gpu-mem": 2}), restartPolicy="Never")
GPU_JOB = workload("batch/v1", "Job", RUN_ONCE)
GPU_JOB["spec"]["suspend"] = True
GPU_TEMPLATE = {**GPU_MEM_POD, "metadata": {"labels": {"app": "gpu"}}}


def controlled(obj: dict, kind: str) -> dict:
    """`obj` with a controller ownerReference to a `kind` (apps/v1 or batch/v1) named gpu."""
    api_version = "batch/v1" if kind == "CronJob" else "apps/v1"
    owner = {"apiVersion": api_version, "kind": kind, "name": "gpu", "controller": True}
    owner["uid"] = "00000000-0000-4000-8000-000000000001"
    obj["metadata"]["ownerReferences"] = [owner]
    return obj


def create(obj: dict) -> tuple[tuple[str, ...], dict]:
    """`kubectl create` of `obj`, stored."""
    return ("create", "-f", "-"), obj


def dry_create(obj: dict) -> tuple[tuple[str, ...], dict]:
    """`kubectl create --dry-run=server` of `obj`."""
    return ("create", "--dry-run=server", "-o", "json", "-f", "-"), obj


def replace(obj: dict) -> tuple[tuple[str, ...], dict]:
    """`kubectl replace` with `obj`: an UPDATE of the stored object."""
    return ("replace", "-f", "-"), obj


SLOW_DOWN = (
    ("patch", "deployment", "gpu", "--type=merge", "-p", '{"spec":{"minReadySeconds":5}}'),
    None,
)
LABEL_DEPLOYMENT = (("label", "deployment", "gpu", "changed=yes"), None)
LABEL_JOB = (("label", "job", "gpu", "changed=yes"), None)
NARROW_JOB = (
    (
        "patch",
        "job",
        "gpu",
        "--type=merge",
        "-p",
        '{"spec":{"template":{"spec":{"nodeSelector":{"team":"ml"}}}}}',
    ),
    None,
)
LABEL_POD = (("label", "pod", "gpu", "changed=yes"), None)
DELETE_POD = (("delete", "pod", "gpu", "--grace-period=0", "--force"), None)
# where (the test's namespace, one named kube-system or lwgpu-system, or the test's after it
# was labelled as kube-system), what is stored first, the observed request, its kind and
# operation, and the endpoints it reaches.
ROUTING = {
    "gpu pod": ("own", [], dry_create(GPU_MEM_POD), "Pod", "CREATE", SENT),
    "annotated pod": ("own", [], dry_create(ANNOTATED_POD), "Pod", "CREATE", SENT),
    "deployment create": ("own", [], dry_create(GPU_DEPLOYMENT), "Deployment", "CREATE", SENT),
    "deployment update": (
        "own",
        [create(GPU_DEPLOYMENT)],
        SLOW_DOWN,
        "Deployment",
        "UPDATE",
        SENT,
    ),
    # Left as it was by the webhook, but sent: a mutating webhook after lwgpu's may change the
    # template in the same request, and only a webhook called first is called again.
    "deployment label": (
        "own",
        [create(GPU_DEPLOYMENT)],
        LABEL_DEPLOYMENT,
        "Deployment",
        "UPDATE",
        SENT,
    ),
    # What the webhook leaves alone whatever it holds is never sent (not-left-alone-whatever-
    # it-holds): a Job's UPDATE, even a suspended one's that may change its template...
    "job label": ("own", [create(GPU_JOB)], LABEL_JOB, "Job", "UPDATE", []),
    "suspended job template": ("own", [create(GPU_JOB)], NARROW_JOB, "Job", "UPDATE", []),
    # ... and what a reviewed workload controls
    "replicaset a deployment controls": (
        "own",
        [],
        dry_create(controlled(workload("apps/v1", "ReplicaSet", GPU_TEMPLATE), "Deployment")),
        "ReplicaSet",
        "CREATE",
        [],
    ),
    "job a cronjob controls": (
        "own",
        [],
        dry_create(controlled(workload("batch/v1", "Job", RUN_ONCE), "CronJob")),
        "Job",
        "CREATE",
        [],
    ),
    "replicaset of its own": (
        "own",
        [],
        dry_create(workload("apps/v1", "ReplicaSet", GPU_TEMPLATE)),
        "ReplicaSet",
        "CREATE",
        SENT,
    ),
    # Pod specs are immutable, so the rules send pods on CREATE only.
    "pod update": (
        "own",
        [create(GPU_MEM_POD)],
        LABEL_POD,
        "Pod",
        "UPDATE",
        [],
    ),
    "pod delete": (
        "own",
        [create(GPU_MEM_POD)],
        DELETE_POD,
        "Pod",
        "DELETE",
        [],
    ),
    "cpu pod": ("own", [], dry_create(CPU_POD), "Pod", "CREATE", []),
    "cpu deployment": ("own", [], dry_create(CPU_DEPLOYMENT), "Deployment", "CREATE", []),
    # An UPDATE is judged on the new object (`object`), not the old one.
    "update that drops the gpu": (
        "own",
        [create(GPU_DEPLOYMENT)],
        replace(CPU_DEPLOYMENT),
        "Deployment",
        "UPDATE",
        [],
    ),
    "update that adds a gpu": (
        "own",
        [create(CPU_DEPLOYMENT)],
        replace(GPU_DEPLOYMENT),
        "Deployment",
        "UPDATE",
        SENT,
    ),
    "kube-system pod": ("kube-system", [], dry_create(GPU_MEM_POD), "Pod", "CREATE", []),
    "kube-system deployment": (
        "kube-system",
        [],
        dry_create(GPU_DEPLOYMENT),
        "Deployment",
        "CREATE",
        [],
    ),
    # lwgpu-system enforces the restricted Pod Security level, which runs after the webhooks.
    "lwgpu-system pod": (
        "lwgpu-system",
        [],
        dry_create(restricted(GPU_MEM_POD)),
        "Pod",
        "CREATE",
        [],
    ),
    "lwgpu-system deployment": (
        "lwgpu-system",
        [],
        dry_create(deployment(restricted(GPU_MEM_POD))),
        "Deployment",
        "CREATE",
        [],
    ),
    "forged name label": ("forged", [], dry_create(GPU_MEM_POD), "Pod", "CREATE", SENT),
}


@pytest.mark.parametrize("case", ROUTING)
def test_which_requests_reach_the_webhook(lwgpu, namespace, case):
    where, stored, (args, obj), kind, operation, endpoints = ROUTING[case]
    for create_args, stored_obj in stored:
        namespace.kubectl(*create_args, input=json.dumps(stored_obj))
    target = namespace.name if where in ("own", "forged") else where
    if where == "forged":
        # The apiserver sets kubernetes.io/metadata.name to the namespace's name on every
        # write (pkg/apis/core/v1/defaults.go, SetDefaults_Namespace): a label cannot opt a
        # namespace out of the namespaceSelector.
        namespace.plane.kubectl(
            "label", "namespace", target, "kubernetes.io/metadata.name=kube-system", "--overwrite"
        )
        labels = namespace.get("namespace", target)["metadata"]["labels"]
        assert labels["kubernetes.io/metadata.name"] == target
    calls = Calls(lwgpu)

    done = namespace.plane.kubectl(
        "-n", target, *args, input=json.dumps(obj) if obj else None, check=False
    )

    assert done.returncode == 0, done.stderr
    seen = calls.since(target, kind)
    assert sorted(c["endpoint"] for c in seen) == endpoints
    assert {c["operation"] for c in seen} <= {operation}
    if not endpoints and operation == "CREATE":  # admitted as written: same resources asked
        admitted = json.loads(done.stdout)
        limits = [c["resources"]["limits"] for c in (admitted, obj) for c in containers_of(c)]
        assert limits[0] == {k: str(v) for k, v in limits[1].items()}


def containers_of(obj: dict) -> list[dict]:
    """The containers of a Pod or of a workload's pod template."""
    return (obj["spec"].get("template") or obj)["spec"]["containers"]


@pytest.fixture(scope="module")
def shared_namespace(lwgpu, control_plane):
    """One namespace for the dry runs of this module's tables."""
    with module_namespace(control_plane, "routing") as namespace:
        yield namespace


def named(obj: dict) -> dict:
    """`obj` with a name, unless it has metadata of its own."""
    return obj if "metadata" in obj else {**obj, "metadata": {"name": "p"}}


# (id, object, sent): what the old CEL double's table claimed, now evaluated by the
# apiserver's CEL. An object without apiVersion and kind cannot be sent at all (kubectl
# refuses it: "apiVersion not set, kind not set"), so that case is gone.
CASES = [
    ("gpu limit", pod(container("main", limits=GPU)), True),
    ("gpushare request only", pod(container("main", requests={"aliyun.com/gpu-mem": 2})), True),
    ("HAMi gpumem", pod(container("main", limits={"nvidia.com/gpumem": 3000})), True),
    (
        "init container only",
        pod(container("main", resources={}), init=(container("init", limits=GPU),)),
        True,
    ),
    ("annotation only", pod(container("main"), annotations=MEMORY_ANNOTATION), True),
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
        pod(container("main"), annotations={"gpu-memory": "2000"}),
        False,
    ),
    ("cpu and memory only", pod(container("main", limits={"cpu": "1", "memory": "1Gi"})), False),
    ("MIG slice", pod(container("main", limits={"nvidia.com/mig-1g.5gb": 1})), False),
    ("no containers", pod(containers=[]), False),
    ("no resources", pod(container("main")), False),
    ("empty resources", pod(container("main", resources={})), False),
    ("null resources", pod(container("main", resources=None)), False),
    ("null limits", pod(container("main", resources={"limits": None, "requests": None})), False),
    ("null container", pod(containers=[None]), False),
    (
        "no metadata",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {"containers": [container("main", limits=GPU)]},
        },
        True,
    ),
    ("deployment", deployment(pod(container("main", limits=GPU))), True),
    (
        "deployment annotation",
        workload(
            "apps/v1", "Deployment", {"metadata": {"annotations": MEMORY_ANNOTATION}, "spec": {}}
        ),
        True,
    ),
    (
        "deployment without gpu",
        deployment(pod(container("main", requests={"cpu": "100m"}))),
        False,
    ),
    (
        "replicationcontroller",
        workload(
            "v1",
            "ReplicationController",
            {
                "metadata": {"labels": {"app": "gpu"}},
                "spec": {
                    "containers": [container("main")],
                    "initContainers": [container("init", limits=GPU)],
                },
            },
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
]


@pytest.mark.parametrize("obj, sent", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hand_written_objects(lwgpu, shared_namespace, obj, sent):
    calls = Calls(lwgpu)
    done = shared_namespace.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
    )
    # Invalid objects are refused after the mutating webhooks: the call still shows.
    mutations = [c for c in calls.since(shared_namespace.name) if c["endpoint"] == "mutate"]
    assert len(mutations) == int(sent), done.stderr
    assert "resulted in error" not in done.stderr  # a CEL error would apply failurePolicy


# PodSpec.containers has no `omitempty` (k8s.io/api/core/v1/types.go), so the apiserver's
# unstructured form of a pod spec without containers holds `containers: null`; has() is true for
# a null field, and `null + list` is a CEL error. The apiserver then applies failurePolicy
# (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go, ShouldCallHook
# via matchconditions.Matcher.Match): Fail refuses with the expression's error instead of the
# validation error ("spec.containers: Required value") the object deserves. webhook-scope.yaml
# therefore compares both container lists with null as well; without that, these objects met the
# CEL error on the real apiserver.
WITHOUT_CONTAINERS = {
    "no spec": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
    "empty spec": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
    "deployment template without spec": workload("apps/v1", "Deployment", {}),
    "cronjob without job spec": {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "c"},
        "spec": {"jobTemplate": {}},
    },
    "init containers only": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"initContainers": [container("init", limits=GPU)]},
    },
    "replicationcontroller with init containers only": workload(
        "v1",
        "ReplicationController",
        {
            "metadata": {"labels": {"app": "gpu"}},
            "spec": {"initContainers": [container("init", limits=GPU)]},
        },
    ),
}


@pytest.mark.parametrize("obj", WITHOUT_CONTAINERS.values(), ids=list(WITHOUT_CONTAINERS))
def test_an_object_without_containers_meets_no_cel_error(lwgpu, shared_namespace, obj):
    done = shared_namespace.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
    )
    assert "resulted in error" not in done.stderr, done.stderr
    assert "spec.containers: Required value" in done.stderr


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
        {"name": st.sampled_from(["a", "b"]), "image": st.just("busybox")},
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
# with containers always: objects without them meet the bug of WITHOUT_CONTAINERS
templates = st.fixed_dictionaries(
    {
        "spec": st.fixed_dictionaries(
            {"containers": containers.filter(bool)}, optional={"initContainers": containers}
        )
    },
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
    },
)
KINDS = [kind for kind in WORKLOAD_KINDS if kind != ("v1", "Pod")]
objects = st.one_of(
    templates.map(
        lambda t: {
            "apiVersion": "v1",
            "kind": "Pod",
            **t,
            "metadata": {**t.get("metadata", {}), "name": "p"},
        }
    ),
    st.tuples(st.sampled_from(KINDS), templates).map(lambda kt: workload(*kt[0], kt[1])),
)


# Each example is one kubectl call (about a third of a second): enough examples to vary the
# shapes, few enough for the module to stay quick.
@settings(max_examples=30, deadline=None)
@given(obj=objects)
def test_whatever_the_decision_acts_on_is_sent(lwgpu, shared_namespace, obj):
    """Never a CEL error, and never an object the decision acts on left out."""
    calls = Calls(lwgpu)
    done = shared_namespace.kubectl(
        "create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
    )
    assert "resulted in error" not in done.stderr, done.stderr
    sent = any(c["endpoint"] == "mutate" for c in calls.since(shared_namespace.name))
    policy = load_policies(SHIPPED_POLICY).for_namespace(shared_namespace.name)
    assert sent or decide(obj, policy).outcome == "skipped"
