"""`review --cluster` on the real control plane: the corpus's workloads stored unrewritten,
found and decided as `review` decides the same files, read with get and list only.

Once for the module, every corpus document of a kind the webhook reviews (one per kind and
name) is created in a namespace of its own that lwgpu's webhooks and final-state check leave
alone (labelled `none`, tests/cluster/rewrite_sides.py), as if created before the install;
kube-controller-manager then makes the ReplicaSets and pods of its Deployments, Jobs,
StatefulSets and DaemonSets, which the review must leave to their owners
(webhook/core/lifecycle.py). The Nodes are the fleet of tests/data/nodes/mixed-fleet.yaml, so
the findings about them are those of `review --nodes` on that file.

Read-only: a ServiceAccount bound to the built-in ClusterRole `view` in the namespace (get,
list and watch; no Nodes, which `view` does not grant) gets the same verdicts; one bound to
nothing gets exit 2 and the apiserver's 403 (RBAC's ForbiddenStatusError, staging/src/
k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go) in one line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.labeller_access import token_kubeconfig
from tests.cluster.rewrite_sides import LABEL, NEITHER, PROBE, dry_create, installed
from tests.offline.junit_schema import check_junit
from tests.support.builders import workload
from tests.support.cli import run_cli
from tests.support.cluster import FLEET
from tests.support.manifests import corpus_files, documents
from tests.support.paths import SHIPPED_POLICY
from tools.cluster.controlplane import ControlPlane
from tools.cluster.install import Installation
from tools.waiting import wait_for
from webhook.cli.review import GRANT
from webhook.files import load_policies
from webhook.offline.live import SERVER_METADATA, WORKLOADS

LISTED = {(r.api_version, r.kind) for r in WORKLOADS}
# kubectl's name of each kind in `kind.group/name created`.
RESOURCE = {
    r.kind.lower() + (f".{r.api_version.split('/')[0]}" if "/" in r.api_version else ""): r.kind
    for r in WORKLOADS
}
COMPARED = ("ref", "policy", "outcome", "allowed", "profile", "reason", "warnings")


@dataclass(frozen=True)
class Stored:
    """The namespace, the corpus documents the apiserver stored there (as a file), and the
    refs (`Kind/namespace/name`) of those objects."""

    plane: ControlPlane
    namespace: str
    file: Path
    refs: frozenset[str]

    def review(self, *argv: str, kubeconfig: Path | None = None) -> tuple[int, str, str]:
        """`review --cluster ARGV` as the admin (or with `kubeconfig`), the shipped policy."""
        config = str(kubeconfig or self.plane.kubeconfig)
        return run_cli(
            "review", "--cluster", "--kubeconfig", config, "--policies", str(SHIPPED_POLICY), *argv
        )

    def review_file(self, *argv: str) -> tuple[int, str, str]:
        """`review FILE -n NAMESPACE ARGV` of the same documents, the shipped policy."""
        policies = ("--policies", str(SHIPPED_POLICY))
        return run_cli("review", str(self.file), "-n", self.namespace, *policies, *argv)


def corpus_workloads() -> list[dict[str, Any]]:
    """Every corpus document of a kind `review --cluster` lists, the first of each kind and
    name, without a namespace of its own."""
    seen: set[tuple[str, str]] = set()
    found = []
    for path in corpus_files():
        for doc in documents(path):
            body = doc.body
            if (
                not isinstance(body, dict)
                or (body.get("apiVersion"), body.get("kind")) not in LISTED
            ):
                continue
            name = (body.get("metadata") or {}).get("name")
            if not name or (body["kind"], name) in seen:
                continue
            seen.add((body["kind"], name))
            copy = json.loads(json.dumps(body))
            copy["metadata"].pop("namespace", None)
            found.append(copy)
    return found


def unrewritten(plane: ControlPlane, namespace: str) -> bool:
    """True once a pod asking GPU memory is stored in `namespace` as sent: no webhook or
    compiled policy decides there (the apiserver's informers have seen the label)."""
    outcome = dry_create(plane, namespace, PROBE)
    limits = (outcome.stored or {}).get("spec", {}).get("containers", [{}])[0].get("resources")
    return not outcome.warnings and "aliyun.com/gpu-mem" in str(limits)


@pytest.fixture(scope="module")
def stored(lwgpu: Installation, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stored]:
    """With lwgpu installed, the corpus's workloads stored unrewritten in a namespace of their
    own, as made before the install, with the ReplicaSets and pods their controllers make."""
    plane = lwgpu.plane
    name = f"review-{os.getpid()}"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    namespace["metadata"]["labels"] = {LABEL: NEITHER}
    with installed(plane, load_policies(SHIPPED_POLICY)):
        plane.kubectl("create", "-f", "-", input=json.dumps(namespace))
        try:
            wait_for(lambda: unrewritten(plane, name), timeout=60, what="lwgpu off the namespace")
            docs = corpus_workloads()
            listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
            created = plane.kubectl(
                "create", "-n", name, "--validate=false", "-f", "-", input=listed, check=False
            )
            made = re.findall(r"^(\S+)/(\S+) created$", created.stdout, re.MULTILINE)
            refs = frozenset(f"{RESOURCE[kind]}/{name}/{obj}" for kind, obj in made)
            kept = [d for d in docs if f"{d['kind']}/{name}/{d['metadata']['name']}" in refs]
            file = tmp_path_factory.mktemp("review-cluster") / "workloads.yaml"
            file.write_text(yaml.safe_dump_all(kept, sort_keys=False), encoding="utf-8")
            deployments = sum(ref.startswith("Deployment/") for ref in refs)

            def owned_made() -> bool:
                found = plane.kubectl("get", "rs,pods", "-n", name, "-o", "name").stdout.split()
                sets = sum(line.startswith("replicaset") for line in found)
                pods = sum(line.startswith("pod/") for line in found)
                return sets >= deployments and pods > sum(r.startswith("Pod/") for r in refs)

            wait_for(owned_made, timeout=60, what="the controllers' ReplicaSets and pods")
            yield Stored(plane, name, file, refs)
        finally:
            plane.kubectl("delete", "namespace", name, "--wait=false")
            plane.kubectl(
                "delete", "pods", "--all", "-n", name, "--force", "--grace-period=0", check=False
            )


def by_ref(out: str) -> dict[str, dict]:
    return {v["ref"]: v for v in json.loads(out)}


def changed_values(diff: str) -> dict[str, list[str]]:
    """The added and removed values of each object's diff, by its kubectl diff name: lines
    that open a map are left out, as the apiserver may have made the map lwgpu adds to (a
    Job's template labels)."""
    found: dict[str, list[str]] = {}
    for part in diff.split("diff -u -N LIVE/")[1:]:
        name, _, body = part.partition(" ")
        found[name] = sorted(
            line
            for line in body.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[-1] != ":"
        )
    return found


def test_finds_the_stored_workloads_and_decides_them_as_review_of_the_files(stored):
    """Exactly the workloads created, none of what their controllers made, each decided as
    `review` decides the file: same verdicts, the same values changed in `-o diff`, the same
    findings about the fleet's nodes and the same pods placed on none; `-o yaml` holds
    nothing the apiserver added. A page of 2 objects reads the same."""
    assert len(stored.refs) >= 30
    code, out, err = stored.review("-n", stored.namespace, "-o", "json")
    want_code, want, want_err = stored.review_file("-o", "json", "--nodes", str(FLEET))
    found, expected = by_ref(out), by_ref(want)
    assert set(found) == stored.refs == set(expected)
    for ref, verdict in found.items():
        assert verdict["where"] == "cluster"
        assert {k: verdict[k] for k in COMPARED} == {k: expected[ref][k] for k in COMPARED}
    assert sum(v["outcome"] == "mutated" for v in found.values()) >= 3
    assert code == want_code == 1
    said = [line for line in err.splitlines() if line.startswith("warning: policy")]
    assert said == [line for line in want_err.splitlines() if line.startswith("warning: policy")]
    unplaced = {line.split(" ")[2] for line in err.splitlines() if line.startswith("Unschedul")}
    assert unplaced == {
        line.split(" ")[2] for line in want_err.splitlines() if line.startswith("Unschedul")
    }
    assert len(unplaced) >= 1
    assert stored.review("-n", stored.namespace, "-o", "json", "--chunk-size", "2")[1] == out

    diffs = changed_values(stored.review("-n", stored.namespace, "-o", "diff")[1])
    assert diffs == changed_values(stored.review_file("-o", "diff")[1])
    printed = yaml.safe_load_all(stored.review("-n", stored.namespace, "-o", "yaml")[1])
    admitted = [obj for obj in printed if obj is not None]  # a comment for each denied one
    assert len(admitted) == sum(v["allowed"] for v in found.values())
    for obj in admitted:
        assert "status" not in obj and not set(obj["metadata"]) & set(SERVER_METADATA), obj


def test_junit_has_a_suite_per_namespace(stored):
    """`-A -o junit`: a valid report, one suite per namespace; the namespace's suite holds a
    testcase per stored workload, failing for each denial."""
    code, out, err = stored.review("-A", "-o", "junit")
    assert code in (0, 1), err
    root = check_junit(out)
    for suite in root:
        assert {c.get("name").split("/")[1] for c in suite.findall("testcase")} <= {
            suite.get("name")
        }
    ours = root.find(f"testsuite[@name='{stored.namespace}']")
    assert {case.get("name") for case in ours.findall("testcase")} == stored.refs
    verdicts = by_ref(stored.review("-n", stored.namespace, "-o", "json")[1])
    assert int(ours.get("failures")) >= sum(not v["allowed"] for v in verdicts.values()) >= 1


def test_a_service_account_bound_to_view_reviews_without_the_nodes(stored, tmp_path):
    """Bound to the ClusterRole `view` in the namespace (and given it as its context's
    namespace): the same verdicts as the admin's; the Nodes, which `view` does not grant,
    are said to be left out."""
    plane, ns = stored.plane, stored.namespace
    plane.kubectl("create", "serviceaccount", "reader", "-n", ns)
    plane.kubectl(
        "create", "rolebinding", "reader-view", "--clusterrole=view",
        f"--serviceaccount={ns}:reader", "-n", ns,
    )  # fmt: skip
    account = f"system:serviceaccount:{ns}:reader"

    def allowed() -> bool:
        asked = ("auth", "can-i", "list", "deployments.apps", f"--as={account}", "-n", ns)
        return plane.kubectl(*asked, check=False).stdout.strip() == "yes"

    wait_for(allowed, timeout=30, what="the RoleBinding in RBAC's cache")
    token = plane.kubectl("create", "token", "reader", "-n", ns).stdout.strip()
    kubeconfig = token_kubeconfig(plane, token, tmp_path / "reader.kubeconfig")
    plane.kubectl(
        f"--kubeconfig={kubeconfig}", "config", "set-context", "--current", f"--namespace={ns}"
    )
    code, out, err = stored.review("-o", "json", kubeconfig=kubeconfig)
    assert code in (0, 1), err
    admin = by_ref(stored.review("-n", ns, "-o", "json")[1])
    # Without the Nodes, no verdict says whether a node takes its pods.
    assert all("schedulable" not in verdict for verdict in by_ref(out).values())
    assert by_ref(out) == {
        ref: {k: v for k, v in verdict.items() if k != "schedulable"}
        for ref, verdict in admin.items()
    }
    assert (
        f"warning: cannot list nodes: the API server answered 403 Forbidden: nodes is forbidden: "
        f'User "{account}" cannot list resource "nodes" in API group "" at the cluster scope; '
        "reviewed without the Nodes"
    ) in err


def test_a_service_account_that_may_not_list_gets_the_403_in_one_line(stored, tmp_path):
    """Bound to nothing: exit 2, nothing on stdout, one line naming the list refused, the
    apiserver's reason and what to grant."""
    plane, ns = stored.plane, stored.namespace
    plane.kubectl("create", "serviceaccount", "nobody", "-n", ns)
    token = plane.kubectl("create", "token", "nobody", "-n", ns).stdout.strip()
    kubeconfig = token_kubeconfig(plane, token, tmp_path / "nobody.kubeconfig")
    code, out, err = stored.review("-n", ns, kubeconfig=kubeconfig)
    account = f"system:serviceaccount:{ns}:nobody"
    assert (code, out) == (2, "")
    assert err == (
        f'python -m webhook review: error: cannot list deployments.apps in namespace "{ns}": '
        f"the API server answered 403 Forbidden: deployments.apps is forbidden: User "
        f'"{account}" cannot list resource "deployments" in API group "apps" in the namespace '
        f'"{ns}"; {GRANT}\n'
    )


def test_what_the_webhook_admitted_is_reviewed_unchanged(lwgpu, namespace):
    """The drift report of an installed lwgpu: a Deployment the webhook rewrote when it was
    created is allowed as stored, with nothing to change; its ReplicaSet and pods are its."""
    deployment = workload("apps/v1", "Deployment", PROBE, name="admitted")
    deployment["spec"]["template"]["metadata"] = {"labels": {"app": "admitted"}}
    namespace.kubectl("create", "-f", "-", input=json.dumps(deployment))
    wait_for(
        lambda: namespace.kubectl("get", "pods", "-o", "name").stdout.strip(),
        timeout=30,
        what="the Deployment's pods",
    )
    config = str(namespace.plane.kubeconfig)
    code, out, err = run_cli(
        "review", "--cluster", "--kubeconfig", config, "-n", namespace.name, "-o", "json"
    )
    assert code == 0, err
    [verdict] = json.loads(out)
    assert verdict["ref"] == f"Deployment/{namespace.name}/admitted"
    assert (verdict["outcome"], verdict["profile"], verdict["patch"]) == (
        "allowed",
        "GRID-P4-2Q",
        [],
    )
