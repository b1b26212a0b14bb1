"""`review --cluster` without a cluster: its flags, its errors before any answer, what it
lists and how it turns a stored object back into what its author wrote; the kubernetes
client stays out of a review of files. On the real apiserver:
tests/cluster/test_review_cluster.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.support.builders import pod, workload
from tests.support.cli import run_cli
from tests.support.paths import EXAMPLES, REPO
from webhook.api.workload import TEMPLATE_PATHS, group_of
from webhook.kube.client import connect
from webhook.kube.listing import Resource
from webhook.offline.live import WORKLOADS, as_written, reviewed_controller

PREFIX = "python -m webhook review: error: "
# A kubeconfig whose server listens nowhere (port 1 is never open to a test), with two
# contexts: one naming a namespace, one not.
DEAD = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "dead", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [
        {"name": "team", "context": {"cluster": "dead", "user": "u", "namespace": "team-a"}},
        {"name": "plain", "context": {"cluster": "dead", "user": "u"}},
    ],
    "current-context": "team",
}


@pytest.fixture
def dead(tmp_path):
    path = tmp_path / "dead.kubeconfig"
    path.write_text(yaml.safe_dump(DEAD), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kubeconfig", "x", "-A"], "--kubeconfig, --all-namespaces only go with --cluster"),
        (
            ["--cluster", "deploy.yaml"],
            "--cluster reviews the cluster's workloads: name no files with it",
        ),
        (
            ["--cluster", "--nodes", "n.yaml"],
            "--cluster checks the cluster's own Nodes: --nodes FILE is for files",
        ),
        (["--cluster", "-A", "-n", "x"], "--namespace and --all-namespaces exclude each other"),
        (["--cluster", "--chunk-size", "0"], "--chunk-size must be 1 or more"),
        (["--cluster", "--kubeconfig", "absent"], "absent: cannot read: no such file or directory"),
    ],
    ids=["live-flags-alone", "files", "nodes-file", "namespace-and-all", "chunk", "no-file"],
)
def test_flags_that_cannot_mean_what_they_say_exit_2(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("review", *argv)
    assert (code, out, err) == (2, "", f"{PREFIX}{message}\n")


def test_an_unreachable_api_server_is_one_line_naming_it(dead):
    """Exit 2 and one line: the address, the cause in a few words, where to look."""
    code, out, err = run_cli("review", "--cluster", "--kubeconfig", str(dead))
    assert (code, out) == (2, "")
    assert err == (
        f"{PREFIX}cannot reach the API server https://127.0.0.1:1: connection refused; check "
        "the server of the kubeconfig context (--kubeconfig, --context)\n"
    )


def test_no_configuration_is_one_line_saying_how_to_name_one(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    code, out, err = run_cli("review", "--cluster")
    assert (code, out) == (2, "")
    assert err.startswith(f"{PREFIX}no Kubernetes configuration: not in a cluster and ")
    assert err.endswith("; name one with --kubeconfig or $KUBECONFIG\n") and err.count("\n") == 1


@pytest.mark.parametrize(("context", "namespace"), [(None, "team-a"), ("plain", "default")])
def test_the_namespace_is_the_context_s_as_kubectl_s(context, namespace, dead):
    """kubectl's default `-n`: the context's namespace, `default` where it names none."""
    assert connect(str(dead), context).namespace == namespace


def test_every_kind_the_webhook_reviews_is_listed():
    """A kind added to the decision's table is listed too (or this fails)."""
    assert {(group_of(r.api_version), r.kind) for r in WORKLOADS} == set(TEMPLATE_PATHS)
    assert len(WORKLOADS) == len(TEMPLATE_PATHS)


@pytest.mark.parametrize(
    ("resource", "namespace", "path", "described"),
    [
        (
            WORKLOADS[0], "a", "/apis/apps/v1/namespaces/a/deployments",
            'deployments.apps in namespace "a"',
        ),
        (WORKLOADS[-1], None, "/api/v1/pods", "pods in all namespaces"),
        (Resource("v1", "Node", "nodes", False), "a", "/api/v1/nodes", "nodes"),
    ],
)  # fmt: skip
def test_list_paths_and_names(resource, namespace, path, described):
    assert resource.path(namespace) == path
    assert resource.described(namespace) == described


def owned(obj: dict, api_version: str, kind: str, controller: bool = True) -> dict:
    reference = {"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u"}
    if controller:
        reference["controller"] = True
    obj["metadata"]["ownerReferences"] = [reference]
    return obj


@pytest.mark.parametrize(
    ("obj", "left"),
    [
        (owned(workload("apps/v1", "ReplicaSet", pod()), "apps/v1", "Deployment"), True),
        (owned(workload("batch/v1", "Job", pod()), "batch/v1", "CronJob"), True),
        (owned(pod(), "apps/v1", "ReplicaSet"), True),
        (owned(pod(), "apps/v1", "StatefulSet"), True),
        (owned(pod(), "batch/v1", "Job"), True),
        (owned(pod(), "ray.io/v1", "RayCluster"), False),
        (owned(pod(), "apps/v1", "ReplicaSet", controller=False), False),
        (owned(workload("batch/v1", "Job", pod()), "kueue.x-k8s.io/v1", "Workload"), False),
        (pod(), False),
    ],
    ids=[
        "deployment-s-replicaset", "cronjob-s-job", "replicaset-s-pod", "statefulset-s-pod",
        "job-s-pod", "operator-s-pod", "not-controller", "other-owner-s-job", "standalone",
    ],
)  # fmt: skip
def test_what_a_reviewed_workload_controls_is_left_to_it(obj, left):
    assert reviewed_controller(obj) is left


def test_a_stored_object_is_written_back_without_what_the_apiserver_added():
    stored = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": "p",
            "namespace": "a",
            "labels": {"app": "p"},
            "uid": "u",
            "resourceVersion": "7",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"containers": []},
        "status": {"phase": "Pending"},
    }
    assert as_written(stored) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "a", "labels": {"app": "p"}},
        "spec": {"containers": []},
    }


def test_a_review_of_files_never_imports_the_kubernetes_client():
    """The client costs about a second and 50 MiB: only `--cluster` loads it."""
    code = (
        "import sys; from webhook.cli import main; "
        f"main(['review', {str(EXAMPLES / 'cuda-sample.yaml')!r}, '-o', 'junit']); "
        "print('kubernetes' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "False"
