"""One corpus file on the cluster, held to `webhook review`'s prediction for it.

Each document is created as `kubectl create -f` would send it (the JSON of what `review` read,
so both see the same object), in its own namespace if it names one, else in the test's. Then:

- refused by the apiserver itself: the error must be the one `REFUSED` lists for it;
- denied by lwgpu: kubectl prints the review's reason;
- admitted: kubectl prints the review's warnings; the stored object equals the prediction put
  through the same apiserver without lwgpu (a server-side dry run in kube-system, which the
  webhooks' namespaceSelector leaves out), so every field the apiserver defaults or rewrites
  is accounted for by the apiserver itself, not by a list kept here; and each field the
  review's patch writes is stored exactly as the review printed it (this is where a
  prediction in the wrong spelling, `3000` for a stored `3k`, would show);
- its pods bind or stay Pending as `placement.expect` says, which `review --nodes` must agree
  with: it calls an object unschedulable exactly when no node passes its selectors and offers
  the extended resources it asks.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.cluster.placement import (
    Fleet,
    api,
    expect,
    observe,
    owned_pods,
    pod_requests,
    pod_spec,
)
from tests.support.cli import run_cli
from tests.support.cluster import FLEET
from tests.support.manifests import documents
from tools.waiting import wait_for
from webhook.scheduling import pod_fits_node

WARNING = "Warning: lwgpu: "  # how kubectl prints a warning lwgpu's answer carries
# Fields that differ between any two creations of one manifest; the names of the projected
# service account token volume end in 5 random characters (plugin/pkg/admission/serviceaccount).
VOLATILE = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
TOKEN = re.compile(r"kube-api-access-[a-z0-9]{5}")
MISSING = "<missing>"
NO_KIND = (
    'error: resource mapping not found for name: "{name}" namespace: "" from "STDIN": no '
    'matches for kind "{kind}" in version "{version}"\nensure CRDs are installed first'
)
BAD_ENV = (
    'Error from server (BadRequest): error when creating "STDIN": Pod in version "v1" cannot be '
    "handled as a Pod: json: cannot unmarshal number into Go struct field "
    "EnvVar.spec.containers.env.value of type string"
)
NOT_A_DEPLOYMENT = (
    'The Deployment "benchmarks-client" is invalid: \n* spec.selector: Required value\n'
    "* spec.template.metadata.labels: Invalid value: null: `selector` does not match template "
    "`labels`\n* spec.template.spec.containers[0].image: Required value"
)
NO_NAMESPACE = (
    'Error from server (NotFound): error when creating "STDIN": namespaces "{}" not found'
)
# The corpus documents the apiserver refuses, whatever lwgpu decides, in the words kubectl
# prints. kubectl finds no resource for an API version the apiserver no longer serves
# (apps/v1beta1 since 1.16, policy/v1beta1 and batch/v1beta1 since 1.25) or a custom resource
# without its CRD; the rest are the apiserver's own answers: a namespace that cannot exist
# (a placeholder), a decoding error, validation errors (a kustomize patch is no object).
REFUSED = {
    "AliyunContainerService__ai-models-on-ack__aigc__fastchat__fastchat-gpu.yaml#1": (
        'The Service "fastchat-svc" is invalid: spec.externalTrafficPolicy: Invalid value: '
        '"Local": may only be set for externally-accessible services'
    ),
    "AliyunContainerService__gpushare-device-plugin__demo__binpack-1__binpack-1.yaml#1": (
        NO_KIND.format(name="binpack-1", kind="StatefulSet", version="apps/v1beta1")
    ),
    "NVIDIA__gpu-operator__validator__manifests__cuda-workload-validation.yaml#0": (
        NO_NAMESPACE.format("FILLED_BY_THE_VALIDATOR")
    ),
    "NVIDIA__gpu-operator__validator__manifests__plugin-workload-validation.yaml#0": (
        NO_NAMESPACE.format("FILLED_BY_VALIDATOR")
    ),
    "kubernetes__examples___archived__cockroachdb__cockroachdb-statefulset.yaml#2": (
        NO_KIND.format(
            name="cockroachdb-budget", kind="PodDisruptionBudget", version="policy/v1beta1"
        )
    ),
    "kubernetes__website__content__en__examples__application__job__cronjob.yaml#0": (
        NO_KIND.format(name="hello", kind="CronJob", version="batch/v1beta1")
    ),
    "milvus-io__milvus__ci__jenkins__pod__milvus-gpu-version-build-env-pod.yaml#0": BAD_ENV,
    "milvus-io__milvus__ci__jenkins__pod__rte-gpu.yaml#0": BAD_ENV,
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__mig__patch.yaml#0": (
        NOT_A_DEPLOYMENT
    ),
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__mps__patch.yaml#0": (
        NOT_A_DEPLOYMENT
    ),
    "nebuly-ai__nos__demos__gpu-sharing-comparison__manifests__overlays__ts__patch.yaml#0": (
        NOT_A_DEPLOYMENT
    ),
    "volcano-sh__volcano__example__MindSpore-example__mindspore_gpu__mindspore-gpu.yaml#0": (
        NO_KIND.format(name="mindspore-gpu", kind="Job", version="batch.volcano.sh/v1alpha1")
    ),
}


def review(path: Path, namespace: str, policies: Path) -> tuple[dict[str, dict], set[str]]:
    """`webhook review --nodes FLEET` of one file: its verdicts (`-o json`) by `where`, each
    admitted one with the object `-o yaml` prints for it as `object`, and the `where` of each
    admitted object it calls unschedulable on the fleet."""
    args = ("review", str(path), "-n", namespace, "--policies", str(policies))
    code, out, err = run_cli(*args, "-o", "json", "--nodes", str(FLEET))
    assert code in (0, 1) and out.strip(), err
    verdicts = json.loads(out)
    unplaced = {line.split(" ")[1] for line in err.splitlines() if line.startswith("Unschedulable")}
    code, out, err = run_cli(*args, "-o", "yaml")
    assert code in (0, 1), err
    # -o yaml: the admitted objects in order, a comment standing in for each denied one.
    objects = [o for o in yaml.safe_load_all(out) if o is not None]
    admitted = [v for v in verdicts if v["allowed"]]
    assert len(objects) == len(admitted), out
    for verdict, obj in zip(admitted, objects, strict=True):
        verdict["object"] = obj
    return {v["where"]: v for v in verdicts}, unplaced


def comparable(obj: Mapping[str, Any]) -> dict:
    """The object without what differs between two creations of it: identity, timestamps,
    status, the token volume's suffix, and its own uid and generated name where they are
    copied into it (a Job's selector and pod labels carry them)."""
    meta = obj["metadata"]
    text = TOKEN.sub("kube-api-access-*", json.dumps(obj)).replace(meta["uid"], "<uid>")
    if meta.get("generateName"):
        text = text.replace(f'"{meta["name"]}"', '"<name>"')
    found = json.loads(text)
    for key in (*VOLATILE, "namespace", "name" if meta.get("generateName") else "-"):
        found["metadata"].pop(key, None)
    found.pop("status", None)
    return found


def _at(obj: Any, tokens: list[str]) -> Any:
    for token in tokens:
        if isinstance(obj, list) and token.isdigit() and int(token) < len(obj):
            obj = obj[int(token)]
        elif isinstance(obj, dict) and token in obj:
            obj = obj[token]
        else:
            return MISSING
    return obj


def _leaves(value: Any, tokens: list[str]) -> Iterator[list[str]]:
    """The path of every scalar (or empty map or list) in `value`, which sits at `tokens`."""
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    found = False
    for key, inner in items:
        found = True
        yield from _leaves(inner, [*tokens, str(key)])
    if not found:
        yield tokens


def written(prediction: Any, stored: Any, patch: list[dict]) -> list[tuple[str, Any, Any]]:
    """(path, predicted, stored) of every value the review's patch writes, and every field it
    removes, that is stored otherwise than predicted. Values are compared leaf by leaf: where
    lwgpu adds a whole map (a template's `metadata`), the apiserver may add keys of its own
    beside lwgpu's (a Job's labels)."""
    wrong = []
    for op in patch:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if op["op"] == "remove" or tokens[-1] == "-":  # a removed field, an appended element
            tokens = tokens[:-1] if tokens[-1] == "-" or tokens[-1].isdigit() else tokens
            paths = (
                [tokens] if op["op"] == "remove" else list(_leaves(_at(prediction, tokens), tokens))
            )
        else:
            paths = list(_leaves(op["value"], tokens))
        for path in paths:
            want, got = _at(prediction, path), _at(stored, path)
            if want != got:
                wrong.append(("/" + "/".join(path), want, got))
    return wrong


def lwgpu_warnings(stderr: str) -> list[str]:
    """lwgpu's warnings as kubectl prints them (`Warning: lwgpu: ...`), as the review words them."""
    return [line[9:] for line in stderr.splitlines() if line.startswith(WARNING)]


def dry_run(plane, prediction: Mapping[str, Any]) -> tuple[dict | None, str]:
    """The prediction as this apiserver would store it, lwgpu left out: kube-system is outside
    the webhooks' namespaceSelector (deploy/base/webhook-scope.yaml)."""
    obj = json.loads(json.dumps(prediction))
    obj["metadata"].pop("namespace", None)
    done = plane.kubectl(
        "create", "--dry-run=server", "-n", "kube-system", "-o", "json", "-f", "-",
        input=json.dumps(obj), check=False,
    )  # fmt: skip
    return (json.loads(done.stdout) if done.returncode == 0 else None), done.stderr.strip()


class Homes:
    """The namespaces documents name: made when missing and valid, removed afterwards; in one
    that already existed (default, kube-system) only what the test created is removed, and
    the pods it made are force-deleted, since no kubelet confirms a graceful deletion."""

    def __init__(self, plane, own: str):
        self.plane, self.own = plane, own
        self.made: list[str] = []
        self.objects: list[tuple[str, dict]] = []

    def ensure(self, name: str) -> None:
        """Make namespace `name` unless it exists (an invalid name stays missing)."""
        path = f"/api/v1/namespaces/{name}"
        if name == self.own or name in self.made:
            return
        found = api(self.plane, path)
        if found and found["status"].get("phase") == "Terminating":
            # An earlier test's: a namespace being deleted refuses new content.
            wait_for(lambda: api(self.plane, path) is None, 60, what=f"namespace {name} to go")
            found = None
        made = found is None and self.plane.kubectl("create", "namespace", name, check=False)
        if made and made.returncode == 0:
            self.made.append(name)

    def created(self, namespace: str, obj: dict) -> None:
        """Remember an object created in a namespace that outlives the test."""
        if namespace != self.own and namespace not in self.made:
            self.objects.append((namespace, obj))

    def close(self) -> None:
        """Remove what the test made; pods last, once nothing can make them again."""
        kubectl = self.plane.kubectl
        for namespace, obj in self.objects:
            uid = obj["metadata"]["uid"]
            pods = [p["metadata"]["name"] for p in owned_pods(self.plane, namespace, uid)]
            kubectl("delete", "-f", "-", "--wait=false", input=json.dumps(obj), check=False)
            wait_for(
                lambda namespace=namespace, uid=uid: not _children(self.plane, namespace, uid),
                timeout=60,
                what=f"the ReplicaSets of {obj['metadata']['name']} to go",
            )
            if pods:
                kubectl("delete", "pods", "-n", namespace, "--force", "--grace-period=0",
                        "--ignore-not-found", *pods, check=False)  # fmt: skip
        for namespace in self.made:
            kubectl("delete", "namespace", namespace, "--wait=false", check=False)
            kubectl("delete", "pods", "--all", "-n", namespace, "--force", "--grace-period=0",
                    check=False)  # fmt: skip


def _children(plane, namespace: str, uid: str) -> list[dict]:
    return [
        rs
        for rs in api(plane, f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
        if any(o["uid"] == uid for o in rs["metadata"].get("ownerReferences") or [])
    ]


@contextmanager
def homes(plane, own: str) -> Iterator[Homes]:
    """`Homes` for one test, cleaned up however it ends."""
    found = Homes(plane, own)
    try:
        yield found
    finally:
        found.close()


@dataclass(frozen=True)
class Outcome:
    """What became of one document: in words, and the nodes its pods were bound to."""

    name: str
    text: str
    nodes: frozenset[str] = frozenset()


def check_file(plane, path: Path, namespace: str, policies: Path) -> list[Outcome]:
    """Create every document of `path` and hold the cluster to the review's prediction."""
    verdicts, unplaced = review(path, namespace, policies)
    fleet = Fleet.now(plane)
    results, admitted = [], []
    with homes(plane, namespace) as home:
        for doc in documents(path):
            verdict, name = verdicts[doc.where], doc.where.rsplit("/", 1)[-1]
            where = (doc.body.get("metadata") or {}).get("namespace") or namespace
            home.ensure(where)
            prediction = verdict.get("object")
            template = pod_spec(prediction) if prediction is not None else None
            # Before the real create: the corpus's kube-system objects would exist there then.
            dry, dry_error = dry_run(plane, prediction) if template is not None else (None, "")
            made = plane.kubectl(
                "create", "-n", where, "-o", "json", "-f", "-", input=json.dumps(doc.body),
                check=False,
            )  # fmt: skip
            if name in REFUSED:
                got = (made.returncode, made.stderr.strip())
                assert got == (1, REFUSED[name]), f"{name}: {got}"
                results.append(Outcome(name, f"refused: {REFUSED[name]}"))
                continue
            if not verdict["allowed"]:
                assert made.returncode == 1, f"{name}: {made.stdout}"
                assert made.stderr.strip() == (
                    'Error from server (Forbidden): error when creating "STDIN": admission '
                    f'webhook "mutate.lwgpu.io" denied the request: {verdict["reason"]}'
                ), f"{name}: {made.stderr}"
                results.append(Outcome(name, f"denied: {verdict['reason']}"))
                continue
            assert made.returncode == 0, f"{name}: {made.stderr}"
            stored = json.loads(made.stdout)
            home.created(where, stored)
            warned = lwgpu_warnings(made.stderr)
            assert warned == verdict["warnings"], f"{name}: {warned} != {verdict['warnings']}"
            if template is None:
                results.append(Outcome(name, f"created, a {stored['kind']}"))
                continue
            assert dry is not None, f"{name}: the prediction is refused: {dry_error}"
            assert comparable(stored) == comparable(dry), _differ(name, stored, dry)
            wrong = written(prediction, stored, verdict["patch"])
            assert not wrong, f"{name}: (path, predicted, stored): {wrong}"
            # `review --nodes` says unschedulable exactly when no node passes the selectors and
            # offers every extended resource the pod asks (the fleet has no taints; what other
            # pods use is not counted: the file is a snapshot of Nodes, not of their pods).
            asked = {k: v for k, v in pod_requests(template).items() if "/" in k and v > 0}
            placeable = any(
                pod_fits_node(template, n.labels)
                and all(v <= n.allocatable.get(k, 0) for k, v in asked.items())
                for n in fleet.nodes
            )
            assert (doc.where in unplaced) == (not placeable), f"{name}: {unplaced}"
            admitted.append((name, where, stored, prediction))
        results += _placed(plane, fleet, admitted)
    return results


def _placed(plane, fleet: Fleet, admitted: list) -> list[Outcome]:
    """Await the pods of every admitted object and compare them with the expectation."""
    wanted = {
        name: expect(plane, where, prediction, fleet) for name, where, _, prediction in admitted
    }
    seen = {}

    def settled() -> bool:
        seen.update({name: observe(plane, where, stored) for name, where, stored, _ in admitted})
        return all(
            (seen[name].pods, seen[name].none) == (wanted[name].pods, wanted[name].none)
            for name in wanted
        )

    with contextlib.suppress(TimeoutError):  # the comparison below says what differs
        wait_for(settled, timeout=60, interval=0.5, what="every pod bound or refused")
    results = []
    for name, where, stored, prediction in admitted:
        got, want = seen[name], wanted[name]
        assert (got.pods, got.none) == (want.pods, want.none), f"{name}: {got} != {want}"
        template = pod_spec(prediction)
        if stored["kind"] == "DaemonSet":
            assert got.nodes == want.nodes, f"{name}: {got.nodes} != {want.nodes}"
        for node in got.nodes:
            assert pod_fits_node(template, fleet.labels(node)), f"{name} on {node}"
        if stored["kind"] != "DaemonSet":
            for pod in owned_pods(plane, where, stored["metadata"]["uid"]):
                assert _placement_fields(pod["spec"]) == _placement_fields(template), pod
        summary = (
            ", ".join(f"{n}x {o}" for o, n in sorted(got.pods.items())) or f"no pods: {got.none}"
        )
        results.append(Outcome(name, f"created: {summary}", got.nodes))
    return results


def _differ(name: str, stored: Mapping[str, Any], dry: Mapping[str, Any]) -> str:
    """Where the stored object and the dry run of the prediction part, as a unified diff."""
    a, b = (json.dumps(comparable(o), indent=1, sort_keys=True).splitlines() for o in (dry, stored))
    diff = difflib.unified_diff(a, b, "prediction, dry run", "stored", lineterm="", n=2)
    return f"{name}:\n" + "\n".join(diff)


def _placement_fields(spec: Mapping[str, Any]) -> tuple:
    """What lwgpu writes into a pod spec; a pod made from a rewritten template must carry it
    unchanged (lwgpu reviews the pod again and must add nothing)."""
    limits = [(c.get("resources") or {}).get("limits") for c in spec.get("containers") or []]
    return spec.get("nodeSelector"), spec.get("affinity"), limits
