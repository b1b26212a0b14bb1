"""The labeller confined to its own Node (deploy/base/labeller-confinement.yaml) on the real
kube-apiserver, with the token a labeller pod really gets.

The labeller's objects are applied from the install's render (`kubectl kustomize deploy/`):
the namespace, ServiceAccount, ClusterRole and binding lwgpu-labeller, and the
ValidatingAdmissionPolicy and binding lwgpu-labeller-own-node. A pod of the labeller
DaemonSet's template is bound to node A of the test's own (no kubelet runs it: it need only
exist), and `kubectl create token --bound-object-kind Pod` asks the TokenRequest API for the
token kubelet would mount in it. The apiserver writes the pod's node into that token
(pkg/registry/core/serviceaccount/storage/token.go, TokenREST.Create, feature
ServiceAccountTokenPodNodeInfo) and hands it on as the user's extra
`authentication.kubernetes.io/node-name` (staging/src/k8s.io/apiserver/pkg/authentication/
serviceaccount/util.go, NodeNameKey), as test/e2e/auth/per_node_update.go checks too.

With that token, node A's three GPU labels may be set, changed and removed; writing node B, a
taint, a cordon, another label or annotation, an ownerReference, a finalizer or a bad value are
each refused with the policy's message, and so are a create, a delete and a status write that a
wider role would allow. Without the policy the same writes succeed: it is what stops them.
`label-node` itself labels its node with the token, and logs the policy's reason when told to
label another.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from tests.cluster.labeller_access import (
    ACCOUNT,
    B_UID,
    NS,
    POLICY,
    A,
    B,
    Labeller,
    apply,
    labeller_pod,
    refusal,
    token_kubeconfig,
)
from tests.fakes.nvml import FakeNVML
from tools.cluster import install
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for
from webhook.cli import main

COUNT, MEM, NAME = (f"aliyun.accelerator/nvidia_{key}" for key in ("count", "mem", "name"))
GPU_LABELS = {COUNT: "1", MEM: "2048MiB", NAME: "GRID-P4-2Q"}
# Seconds for a policy or role applied or deleted to be seen (the apiserver's informers).
SETTLE_S = 30
ONLY_LABELS = ": it writes labels only"
SPEC = f"lwgpu-labeller may not change the spec of node {A} (taints, unschedulable, podCIDR, "
SPEC += f"providerID){ONLY_LABELS}"
OTHER_LABELS = f"lwgpu-labeller may change only the labels {COUNT}, {MEM}, {NAME} of node {A}; "
OTHER_LABELS += "this request changes "
OWNER = {"apiVersion": "v1", "kind": "Node", "name": B, "uid": B_UID}
# (what, the labeller's kubectl arguments, the policy's message), with the placeholders.
REFUSED = [
    (
        "another node",
        ["label", "node", B, f"{COUNT}=1"],
        f"lwgpu-labeller on node {A} may not write node {B}: only its own node",
    ),
    ("a taint", ["taint", "node", A, "lwgpu-test=x:NoSchedule"], SPEC),
    ("a cordon", ["cordon", A], SPEC),
    ("another label", ["label", "node", A, "lwgpu-test=x"], OTHER_LABELS + "lwgpu-test"),
    (
        "another nvidia_ label",
        ["label", "node", A, "aliyun.accelerator/nvidia_driver=535"],
        OTHER_LABELS + "aliyun.accelerator/nvidia_driver",
    ),
    (
        "an annotation",
        ["annotate", "node", A, "lwgpu-test=x"],
        f"lwgpu-labeller may not change the annotations of node {A}{ONLY_LABELS}",
    ),
    (
        "an ownerReference",
        ["patch", "node", A, "-p", json.dumps({"metadata": {"ownerReferences": [OWNER]}})],
        f"lwgpu-labeller may not change the ownerReferences of node {A}{ONLY_LABELS}",
    ),
    (
        "a finalizer",
        ["patch", "node", A, "-p", '{"metadata": {"finalizers": ["lwgpu.io/test"]}}'],
        f"lwgpu-labeller may not change the finalizers of node {A}{ONLY_LABELS}",
    ),
    (
        "a count of zero",
        ["label", "--overwrite", "node", A, f"{COUNT}=0"],
        f"lwgpu-labeller: {COUNT}=0 on node {A} is not a positive whole number of GPUs",
    ),
    (
        "memory not in MiB",
        ["label", "--overwrite", "node", A, f"{MEM}=2Gi"],
        f"lwgpu-labeller: {MEM}=2Gi on node {A} is not a positive whole number of MiB written"
        " <n>MiB (e.g. 2048MiB)",
    ),
    (
        "an empty name",
        ["label", "--overwrite", "node", A, f"{NAME}="],
        f"lwgpu-labeller: {NAME}= on node {A} is not a GPU name as label-node writes it"
        " (e.g. GRID-P4-2Q)",
    ),
]
ONLY_UPDATE = "lwgpu-labeller may only update the labels of its own node; it may not "


@pytest.fixture(scope="module")
def render(control_plane: ControlPlane) -> dict[str, dict]:
    """The labeller's objects of the install's render by kind, applied as `kubectl apply -k
    deploy/` applies them; all but the DaemonSet, which would make pods on the fleet."""
    wanted = {
        ("Namespace", NS),
        ("ServiceAccount", ACCOUNT),
        ("ClusterRole", ACCOUNT),
        ("ClusterRoleBinding", ACCOUNT),
        ("DaemonSet", ACCOUNT),
        ("ValidatingAdmissionPolicy", POLICY),
        ("ValidatingAdmissionPolicyBinding", POLICY),
    }
    objects = {
        o["kind"]: o
        for o in yaml.safe_load_all(install.render(control_plane))
        if o and (o["kind"], o["metadata"]["name"]) in wanted
    }
    assert len(objects) == len(wanted)
    apply(control_plane, [o for kind, o in objects.items() if kind != "DaemonSet"])
    return objects


@pytest.fixture
def labeller(control_plane, render, own_nodes, tmp_path) -> Iterator[Labeller]:
    """Nodes A and B of the test's own, a labeller pod bound to A and its pod-bound token;
    returns once the policy is enforced."""
    node = own_nodes.create("gpu-a", {"kubernetes.io/os": "linux"})
    other = own_nodes.create("gpu-b", {"kubernetes.io/os": "linux"})
    pod = labeller_pod(render, node)
    control_plane.kubectl("create", "-f", "-", input=json.dumps(pod))
    try:
        token = control_plane.kubectl(
            "create", "token", ACCOUNT, "-n", NS, "--duration", "1h",
            "--bound-object-kind", "Pod", "--bound-object-name", pod["metadata"]["name"],
        ).stdout.strip()  # fmt: skip
        kubeconfig = token_kubeconfig(control_plane, token, tmp_path / "labeller.kubeconfig")
        bound = Labeller(control_plane, kubeconfig, node, other)
        wait_for(lambda: refusal(bound.probe()), timeout=SETTLE_S, what="the policy")
        yield bound
    finally:
        control_plane.kubectl(
            "delete", "pod", pod["metadata"]["name"], "-n", NS, "--force", "--grace-period=0"
        )


def test_the_token_names_the_pods_node(labeller):
    """The premise: the apiserver authenticates the token as the labeller on node A."""
    review = json.loads(labeller.kubectl("auth", "whoami", "-o", "json").stdout)["status"]
    assert review["userInfo"]["username"] == f"system:serviceaccount:{NS}:{ACCOUNT}"
    node_name = review["userInfo"]["extra"]["authentication.kubernetes.io/node-name"]
    assert node_name == [labeller.node]


def test_its_own_nodes_gpu_labels_may_be_set_changed_and_removed(labeller):
    pairs = [f"{key}={value}" for key, value in GPU_LABELS.items()]
    for args in (
        ["label", "node", A, *pairs],
        ["label", "--overwrite", "node", A, f"{MEM}=7611MiB", f"{NAME}=Tesla-P4"],
        ["label", "node", A, f"{NAME}-"],
    ):
        done = labeller.kubectl(*args)
        assert done.returncode == 0, done.stderr
    labels = labeller.stored(labeller.node)["metadata"]["labels"]
    assert labels == {"kubernetes.io/os": "linux", COUNT: "1", MEM: "7611MiB"}


@pytest.mark.parametrize("what, args, message", REFUSED, ids=[case[0] for case in REFUSED])
def test_each_other_write_is_refused_with_the_policys_message(labeller, what, args, message):
    nodes = (labeller.node, labeller.other)
    before = [labeller.stored(name) for name in nodes]
    done = labeller.kubectl(*args)  # `kubectl cordon` exits 0 even when refused
    assert refusal(done) == labeller.says(message), done.stderr
    assert [labeller.stored(name) for name in nodes] == before


def test_without_the_policy_the_same_writes_succeed(labeller, render):
    """With the policy and its binding deleted, each refused write goes through: RBAC alone
    lets the labeller do all of it. The policy is applied again at the end, and awaited."""
    plane, node = labeller.plane, labeller.node
    confinement = [render["ValidatingAdmissionPolicyBinding"], render["ValidatingAdmissionPolicy"]]
    plane.kubectl("delete", "-f", "-", input=yaml.safe_dump_all(confinement))
    try:
        wait_for(lambda: labeller.probe().returncode == 0, timeout=SETTLE_S, what="no policy")
        for what, args, _ in REFUSED:
            done = labeller.kubectl(*args)
            assert done.returncode == 0 and not done.stderr, f"{what}: {done.stderr}"
        stored = labeller.stored(node)
        assert stored["spec"]["unschedulable"] is True
        assert stored["spec"]["taints"][0]["key"] == "lwgpu-test"
        assert stored["metadata"]["finalizers"] == ["lwgpu.io/test"]
        assert stored["metadata"]["ownerReferences"][0]["name"] == labeller.other
        assert stored["metadata"]["labels"][NAME] == ""
    finally:
        # The finalizer would keep node A from being deleted at the end of the test.
        plane.kubectl("patch", "node", node, "-p", '{"metadata": {"finalizers": null}}')
        apply(plane, confinement[::-1])
        wait_for(lambda: refusal(labeller.probe()), timeout=SETTLE_S, what="the policy")


def test_a_token_without_the_node_claim_writes_nothing(labeller, tmp_path):
    """A TokenRequest bound to no pod carries no node: not even node A's labels."""
    token = labeller.plane.kubectl("create", "token", ACCOUNT, "-n", NS).stdout.strip()
    kubeconfig = token_kubeconfig(labeller.plane, token, tmp_path / "unbound.kubeconfig")
    unbound = Labeller(labeller.plane, kubeconfig, labeller.node, labeller.other)
    done = unbound.kubectl("label", "node", A, f"{COUNT}=1")
    assert refusal(done) == (
        "lwgpu-labeller: this token has no node claim (user extra"
        " authentication.kubernetes.io/node-name): only the token of a labeller pod bound to a"
        " node may write a Node (Kubernetes 1.30 or later)"
    )


@pytest.fixture
def wider_role(labeller) -> Iterator[None]:
    """A ClusterRole that also grants creating, deleting and status writes of Nodes, bound to
    the labeller's account (as a careless later install might), deleted at the end."""
    plane, name = labeller.plane, f"lwgpu-test-wider-{labeller.node}"
    plane.kubectl(
        "create", "clusterrole", name, "--verb=create,delete,get,patch",
        "--resource=nodes,nodes/status",
    )  # fmt: skip
    plane.kubectl(
        "create", "clusterrolebinding", name, f"--clusterrole={name}",
        f"--serviceaccount={NS}:{ACCOUNT}",
    )  # fmt: skip
    try:
        yield
    finally:
        plane.kubectl("delete", "clusterrolebinding,clusterrole", name)


def test_create_delete_and_status_are_refused_whatever_rbac_grants(labeller, wider_role):
    # RBAC refuses the delete until the authorizer sees the wider role, the policy from then.
    deleted = wait_for(
        lambda: refusal(labeller.kubectl("delete", "node", A)),
        timeout=SETTLE_S,
        what="RBAC to let the delete through to admission",
    )
    assert deleted == labeller.says(ONLY_UPDATE + f"DELETE node {A}")
    new = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"{labeller.node}-new"}}
    created = labeller.kubectl("create", "-f", "-", input=json.dumps(new))
    assert refusal(created) == labeller.says(ONLY_UPDATE + f"CREATE node {A}-new"), created.stderr
    gpus = '{"status": {"capacity": {"nvidia.com/gpu": "8"}}}'
    status = labeller.kubectl("patch", "node", A, "--subresource", "status", "-p", gpus)
    assert refusal(status) == labeller.says(ONLY_UPDATE + f"UPDATE the status of node {A}"), (
        status.stderr
    )
    assert "nvidia.com/gpu" not in labeller.stored(labeller.node)["status"].get("capacity", {})


def test_label_node_labels_its_own_node_and_logs_why_not_another(labeller, monkeypatch, capsys):
    """`label-node` as the pod runs it, with the pod's token: its own node is labelled; told
    another node's name, it exits 1 and its log line carries the policy's reason."""
    FakeNVML([("GRID P4-2Q", 2048 * 2**20)]).install(monkeypatch)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(labeller.kubeconfig))
    assert main(["label-node", "--node", labeller.node]) == 0
    labels = labeller.stored(labeller.node)["metadata"]["labels"]
    assert labels == {"kubernetes.io/os": "linux", **GPU_LABELS}
    capsys.readouterr()
    assert main(["label-node", "--node", labeller.other]) == 1
    log = capsys.readouterr().err
    said = f"API server answered 403 Forbidden for node {labeller.other}: nodes "
    assert said in log
    assert labeller.says(REFUSED[0][2]) in log
