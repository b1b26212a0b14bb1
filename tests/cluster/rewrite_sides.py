"""The webhook and the rewrite in the apiserver side by side on one control plane, for
comparing what each makes of the same object.

For a module, `lwgpu-mutate` (and `lwgpu-validate`, where installed) leave out namespaces
labelled `lwgpu-test/admission` `apiserver` or `none`, and the compiled MutatingAdmissionPolicy
and final-state ValidatingAdmissionPolicy of the shipped policy are bound to the namespaces
labelled `apiserver` only (renamed, so that they never meet the check the install keeps):
- a namespace without the label is decided by the webhook alone, as installed;
- one labelled `apiserver` by the compiled policies alone;
- one labelled `none` by neither (workloads made "before the install").
The check the install creates (`lwgpu-final-state`, bound everywhere) evaluates on both sides,
where it passes what either side rewrote (tests/cluster/test_final_state.py holds it to that);
its binding is patched to leave `none` namespaces out. Everything is undone at the end.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.cluster.corpus_check import comparable
from tests.support.builders import gpu_mem, pod
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for
from webhook.compile import final_state_check, rewrite_policy
from webhook.policy import PolicySet, load_documents, policy_set

LABEL = "lwgpu-test/admission"
APISERVER, NEITHER = "apiserver", "none"
CONFIGS = (
    "mutatingwebhookconfiguration/lwgpu-mutate",
    "validatingwebhookconfiguration/lwgpu-validate",
)
# The final-state check the install creates, bound everywhere: kept off `none` namespaces.
INSTALLED_CHECK = "validatingadmissionpolicybinding/lwgpu-final-state"
WARNING = "Warning: lwgpu: "
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
PROBE = pod(gpu_mem(2))
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def compiled(policies: PolicySet) -> list[dict[str, Any]]:
    """The rewrite and the final-state check, renamed and bound to `apiserver` namespaces."""
    objects = rewrite_policy(policies) + final_state_check(policies)
    for obj in objects:
        name = "lwgpu-test-" + obj["metadata"]["name"].removeprefix("lwgpu-")
        obj["metadata"]["name"] = name
        if obj["kind"].endswith("Binding"):
            obj["spec"]["policyName"] = name
            obj["spec"]["matchResources"] = {
                "namespaceSelector": {"matchLabels": {LABEL: APISERVER}}
            }
    return objects


@dataclass(frozen=True)
class Outcome:
    """What the apiserver made of one object: stored (comparable: no identity, no
    namespace, no time) or refused, and lwgpu's warnings."""

    stored: Any
    refusal: str
    warnings: tuple[str, ...]

    @property
    def refused(self) -> bool:
        return self.stored is None


def loaded(served: dict[str, str]) -> PolicySet:
    """The policies of `served` loaded together, in name order, as the webhook loads them."""
    errors: list[str] = []
    found = [p for name in sorted(served) for p in load_documents(served[name], name, errors)]
    return policy_set(found, errors)


def placeholders(text: str, *namespaces: str) -> str:
    """`text` with uids, timestamps and the names of `namespaces` as placeholders."""
    for name in namespaces:
        text = text.replace(name, "<namespace>")
    return TIME.sub("<time>", UID.sub("<uid>", text))


def normal(obj: Mapping[str, Any], *namespaces: str) -> Any:
    """`comparable` and more: owners' uids, timestamps and the namespace's name (in
    `last-applied-configuration`, for one) are the same placeholder on either side; a pod's
    node is the scheduler's choice among equal nodes."""
    found = json.loads(placeholders(json.dumps(comparable(obj)), *namespaces))
    found.get("spec", {}).pop("nodeName", None)
    return found


def dry_create(plane: ControlPlane, namespace: str, obj: Mapping[str, Any]) -> Outcome:
    """`kubectl create --dry-run=server` of `obj` in `namespace`: every admission step runs,
    nothing is stored."""
    body = json.loads(json.dumps(obj))
    if isinstance(body.get("metadata"), dict):
        body["metadata"].pop("namespace", None)
    done = plane.kubectl(
        "create", "--dry-run=server", "-n", namespace, "-o", "json", "-f", "-",
        input=json.dumps(body), check=False,
    )  # fmt: skip
    warnings = tuple(line for line in done.stderr.splitlines() if line.startswith(WARNING))
    if done.returncode:
        return Outcome(None, done.stderr.strip(), warnings)
    return Outcome(normal(json.loads(done.stdout), namespace), "", warnings)


@dataclass(frozen=True)
class Sides:
    """The two namespaces of one comparison: the webhook's and the apiserver's."""

    plane: ControlPlane
    webhook: str
    apiserver: str

    def label(self, value: str | None) -> None:
        """Label both `none` (neither side decides), or back to their own sides."""
        for name, own in ((self.webhook, None), (self.apiserver, APISERVER)):
            wanted = value or own
            self.plane.kubectl(
                "label", "namespace", name, "--overwrite",
                f"{LABEL}={wanted}" if wanted else f"{LABEL}-",
            )  # fmt: skip

    def await_sides(self, probe: Mapping[str, Any] = PROBE) -> None:
        """Wait until the apiserver's informers see the labels: `probe`, a pod the policy
        rewrites, is rewritten on both sides, with lwgpu's warning on the webhook's only."""

        def ready() -> bool:
            by_webhook = dry_create(self.plane, self.webhook, probe)
            by_apiserver = dry_create(self.plane, self.apiserver, probe)
            return (
                bool(by_webhook.warnings)
                and not by_apiserver.warnings
                and not by_apiserver.refused
                and by_webhook.stored == by_apiserver.stored
            )

        wait_for(ready, timeout=60, what="the webhook and the compiled policies on their sides")


def _exclusion(plane: ControlPlane, config: str) -> int | None:
    """Add the label's exclusion to a webhook configuration's namespaceSelector; the index
    it was added at (None: the configuration is not installed)."""
    found = plane.kubectl("get", config, "-o", "json", check=False)
    if found.returncode:
        return None
    selector = json.loads(found.stdout)["webhooks"][0].get("namespaceSelector") or {}
    at = len(selector.get("matchExpressions") or [])
    excluded = {"key": LABEL, "operator": "NotIn", "values": [APISERVER, NEITHER]}
    patch = [
        {"op": "add", "path": "/webhooks/0/namespaceSelector/matchExpressions/-", "value": excluded}
    ]
    plane.kubectl("patch", config, "--type=json", "-p", json.dumps(patch))
    return at


def _owners(plane: ControlPlane, name: str) -> list[dict[str, Any]] | None:
    """The field owners (managedFields) of an object; None when it is not there."""
    found = plane.kubectl("get", name, "-o", "json", "--show-managed-fields", check=False)
    if found.returncode:
        return None
    managed: list[dict[str, Any]] = json.loads(found.stdout)["metadata"]["managedFields"]
    return managed


@contextmanager
def installed(plane: ControlPlane, policies: PolicySet) -> Iterator[None]:
    """The compiled policies created and the webhook kept off their namespaces, until the
    block ends."""
    objects = json.dumps({"apiVersion": "v1", "kind": "List", "items": compiled(policies)})
    owners = {name: _owners(plane, name) for name in (*CONFIGS, INSTALLED_CHECK)}
    added = {config: _exclusion(plane, config) for config in CONFIGS}
    bound = plane.kubectl("get", INSTALLED_CHECK, check=False).returncode == 0
    if bound:
        away = {"matchExpressions": [{"key": LABEL, "operator": "NotIn", "values": [NEITHER]}]}
        patch = {"spec": {"matchResources": {"namespaceSelector": away}}}
        plane.kubectl("patch", INSTALLED_CHECK, "--type=merge", "-p", json.dumps(patch))
    plane.kubectl("create", "-f", "-", input=objects)
    try:
        yield
    finally:
        plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=objects)
        if bound:
            undo = json.dumps([{"op": "remove", "path": "/spec/matchResources"}])
            plane.kubectl("patch", INSTALLED_CHECK, "--type=json", "-p", undo)
        for config, at in added.items():
            if at is not None:
                path = f"/webhooks/0/namespaceSelector/matchExpressions/{at}"
                patch = json.dumps([{"op": "remove", "path": path}])
                plane.kubectl("patch", config, "--type=json", "-p", patch)
        # The patches made kubectl-patch an owner of the fields they touched, and a later
        # server-side apply of the install would conflict with it: give them back.
        for name, managed in owners.items():
            if managed is not None:
                back = json.dumps({"metadata": {"managedFields": managed}})
                plane.kubectl("patch", name, "--type=merge", "-p", back)


@contextmanager
def sides(plane: ControlPlane, tag: str, label: str | None = None) -> Iterator[Sides]:
    """Two fresh namespaces `<tag>-w` and `<tag>-a`, labelled for their sides (or `label`),
    deleted with their pods at the end."""
    made = Sides(plane, f"{tag}-w", f"{tag}-a")
    for name in (made.webhook, made.apiserver):
        plane.kubectl("create", "namespace", name)
    try:
        made.label(label)
        yield made
    finally:
        for name in (made.webhook, made.apiserver):
            plane.kubectl("delete", "namespace", name, "--wait=false")
            plane.kubectl(
                "delete", "pods", "--all", "-n", name, "--force", "--grace-period=0",
                check=False,
            )  # fmt: skip
