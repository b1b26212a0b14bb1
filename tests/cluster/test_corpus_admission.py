"""Every document of the corpus (and the seed examples) created with `kubectl create
--dry-run=server` in a namespace of the real control plane with lwgpu installed: the real
kube-apiserver decodes, defaults and routes it, its CEL evaluates the matchConditions of
deploy/base/webhook-scope.yaml, and the webhook's access log says which documents reached it
and what it decided.

The oracle is the pure decision (`webhook.core.decision.decide`) on the object as the
apiserver hands it to admission. For a document lwgpu leaves alone that object is what the
dry run returns; for one it rewrites or refuses it is what a dry run in kube-system returns
(kube-system is outside the webhooks' namespaceSelector, and the apiserver's own admission
plugins, which run before webhooks, default it the same way there). The apiserver hands
objects over in its canonical form (quantities included: `3000` arrives as `3k`, the String
of `resource.Quantity`, staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go), which
is why the document as written is not the oracle's input.

Documents are dry-run only: nothing is stored, so one namespace serves the whole module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster.admission_support import MUTATE, Calls, answered, at, module_namespace
from tests.support.manifests import corpus_files, documents
from tests.support.paths import EXAMPLES, SHIPPED_POLICY
from webhook.core.decision import decide
from webhook.files import load_policies

SEEDS = {"cuda-sample.yaml#0": "allowed", "cuda-sample-gpu-mem.yaml#0": "mutated"}
DOCUMENTS = {
    Path(d.where).name: d.body
    for f in [*corpus_files(), *(EXAMPLES / s.split("#")[0] for s in SEEDS)]
    for d in documents(f)
}
# Documents refused whatever lwgpu does: the real error, and the endpoints the request reached
# before it (none when the apiserver refuses it before admission).
REFUSED = {
    # Removed API versions: kubectl finds no mapping in the apiserver's discovery and sends
    # nothing (k8s.io/apimachinery/pkg/api/meta/restmapper.go, NoKindMatchError).
    "AliyunContainerService__gpushare-device-plugin__demo__binpack-1__binpack-1.yaml#1": (
        'no matches for kind "StatefulSet" in version "apps/v1beta1"',
        [],
    ),
    "kubernetes__examples___archived__cockroachdb__cockroachdb-statefulset.yaml#2": (
        'no matches for kind "PodDisruptionBudget" in version "policy/v1beta1"',
        [],
    ),
    "kubernetes__website__content__en__examples__application__job__cronjob.yaml#0": (
        'no matches for kind "CronJob" in version "batch/v1beta1"',
        [],
    ),
    # A custom resource whose CRD (volcano's) is not installed.
    "volcano-sh__volcano__example__MindSpore-example__mindspore_gpu__mindspore-gpu.yaml#0": (
        'no matches for kind "Job" in version "batch.volcano.sh/v1alpha1"',
        [],
    ),
    # Integers in string fields: the apiserver cannot decode them, so admission never starts.
    "milvus-io__milvus__ci__jenkins__pod__milvus-gpu-version-build-env-pod.yaml#0": (
        "json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value"
        " of type string",
        [],
    ),
    "milvus-io__milvus__ci__jenkins__pod__rte-gpu.yaml#0": (
        "json: cannot unmarshal number into Go struct field EnvVar.spec.containers.env.value"
        " of type string",
        [],
    ),
    # Invalid as written: validation runs after the mutating webhooks and before the
    # validating ones (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go,
    # Store.Create: BeforeCreate, then createValidation), so a GPU object reaches /mutate only.
    "AliyunContainerService__ai-models-on-ack__aigc__fastchat__fastchat-gpu.yaml#1": (
        'spec.externalTrafficPolicy: Invalid value: "Local": may only be set for'
        " externally-accessible services",
        [],
    ),
    # A placeholder its operator fills in is no resource name.
    "NVIDIA__gpu-operator__validator__manifests__plugin-workload-validation.yaml#0": (
        'resources.limits[FILLED_BY_VALIDATOR]: Invalid value: "FILLED_BY_VALIDATOR": must be a'
        " standard resource type or fully qualified",
        [],
    ),
    # kustomize patch fragments: no selector, no image.
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__mig__patch.yaml#0": (
        "spec.selector: Required value",
        [],
    ),
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__mps__patch.yaml#0": (
        "spec.selector: Required value",
        ["mutate"],
    ),
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__ts__patch.yaml#0": (
        "spec.selector: Required value",
        ["mutate"],
    ),
}


def asks_gpu(obj: dict) -> bool:
    """What webhook-scope.yaml says its matchConditions send, written apart from its CEL: a
    container or init container of the object, its pod template or its CronJob's job
    template naming a resource that contains "gpu", or the lwgpu.io/gpu-memory annotation."""
    spec = obj.get("spec") or {}
    job = (spec.get("jobTemplate") or {}).get("spec") or {}
    for template in (obj, spec.get("template") or {}, job.get("template") or {}):
        if "lwgpu.io/gpu-memory" in ((template.get("metadata") or {}).get("annotations") or {}):
            return True
        inner = template.get("spec") or {}
        for each in (inner.get("containers") or []) + (inner.get("initContainers") or []):
            resources = (each or {}).get("resources") or {}
            names = [*(resources.get("limits") or {}), *(resources.get("requests") or {})]
            if any("gpu" in name for name in names):
                return True
    return False


def without_namespace(body: dict) -> dict:
    """The document without its own `metadata.namespace`: kubectl refuses one that differs
    from `-n` before sending anything, and the module's namespace is where it is reviewed."""
    copy = json.loads(json.dumps(body))
    (copy.get("metadata") or {}).pop("namespace", None)
    return copy


def service_accounts() -> set[str]:
    """The ServiceAccounts the corpus's pods run as: the ServiceAccount admission plugin,
    which runs before the webhooks, refuses a pod whose account does not exist
    (plugin/pkg/admission/serviceaccount/admission.go, `Admit`)."""
    names = set()
    for body in DOCUMENTS.values():
        spec = (body.get("spec") or {}) if isinstance(body, dict) else {}
        for pod_spec in (spec, (spec.get("template") or {}).get("spec") or {}):
            names |= {
                pod_spec[k] for k in ("serviceAccountName", "serviceAccount") if k in pod_spec
            }
    return names


@pytest.fixture(scope="module")
def corpus_namespace(lwgpu, control_plane):
    """One namespace for every document, with the ServiceAccounts they name."""
    with module_namespace(control_plane, "corpus") as namespace:
        for name in sorted(service_accounts()):
            namespace.kubectl("create", "serviceaccount", name)
        yield namespace


def dry_run(namespace, body: dict):
    """`kubectl create --dry-run=server -o json` of one object in `namespace`."""
    return namespace.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(body), check=False
    )


def as_admitted_elsewhere(plane, body: dict, namespace: str) -> dict:
    """The object as the apiserver hands it to admission, got where lwgpu is not called."""
    done = plane.kubectl(
        "create", "-n", "kube-system", "--dry-run=server", "-o", "json", "-f", "-",
        input=json.dumps(body),
    )  # fmt: skip
    received = json.loads(done.stdout)
    received["metadata"]["namespace"] = namespace
    return received


def lwgpu_warnings(stderr: str) -> list[str]:
    """The warnings kubectl printed that lwgpu wrote (the apiserver adds its own)."""
    return [
        line.removeprefix("Warning: ")
        for line in stderr.splitlines()
        if line.startswith("Warning: lwgpu")
    ]


@pytest.mark.parametrize("doc_id", sorted(DOCUMENTS))
def test_each_document_reaches_the_webhook_exactly_as_the_match_conditions_say(
    lwgpu, corpus_namespace, doc_id
):
    body = without_namespace(DOCUMENTS[doc_id])
    ns = corpus_namespace.name
    before, calls = answered(lwgpu), Calls(lwgpu)

    done = dry_run(corpus_namespace, body)

    seen = calls.since(ns)
    assert answered(lwgpu) - before == len(seen)  # the metrics and the log agree
    if doc_id in REFUSED:
        error, reached = REFUSED[doc_id]
        assert done.returncode == 1 and error in done.stderr, done.stderr
        assert sorted(c["endpoint"] for c in seen) == reached
        return
    policy = load_policies(SHIPPED_POLICY).for_namespace(ns)
    acts = decide(body, policy).outcome in ("mutated", "denied")
    received = (
        as_admitted_elsewhere(corpus_namespace.plane, body, ns) if acts else json.loads(done.stdout)
    )
    decision = decide(received, policy)
    assert SEEDS.get(doc_id, decision.outcome) == decision.outcome
    sent = asks_gpu(received)
    assert sent or decision.outcome == "skipped"  # whatever the decision acts on is sent
    if "gpu" not in json.dumps(body).lower():
        assert not sent
    mutations = [c["decision"] for c in seen if c["endpoint"] == "mutate"]
    assert mutations == ([decision.outcome] if sent else [])
    assert sorted(c["endpoint"] for c in seen) == (["mutate"] if sent else [])
    assert all(c["dry_run"] and c["operation"] == "CREATE" for c in seen)
    if decision.outcome == "denied":
        assert done.returncode == 1
        assert done.stderr.strip() == (
            'Error from server (Forbidden): error when creating "STDIN": admission webhook'
            f' "{MUTATE}" denied the request: {decision.reason}'
        )
        return
    assert done.returncode == 0, done.stderr
    assert lwgpu_warnings(done.stderr) == list(decision.warnings)
    admitted = json.loads(done.stdout)
    # The apiserver fills in names of its own (the token volume's, a Job's controller-uid)
    # anew on each create: compare where lwgpu's patch writes, not the whole object.
    for op in decision.patch:
        assert at(admitted, op["path"]) == at(decision.obj, op["path"]), op


def test_the_corpus_exercises_every_outcome():
    """Keeps the test above meaningful: the decision rewrites, refuses, allows and skips."""
    policy = load_policies(SHIPPED_POLICY).for_namespace("corpus")
    outcomes = {
        decide(without_namespace(body), policy).outcome
        for key, body in DOCUMENTS.items()
        if key not in REFUSED
    }
    assert outcomes == {"skipped", "allowed", "mutated", "denied"}
