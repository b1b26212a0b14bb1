"""`policy sync`'s loop on a real kube-apiserver, acting as the webhook's ServiceAccount with
the shipped rules: each good load applied, a bad one keeping what was applied, API refusals
retried with backoff and logged once, another writer's change repaired, and nothing but its
own two objects within its reach.

The control plane is one of this module's own (about 5 s to start): the session's carries
the installed lwgpu, whose sidecars keep `lwgpu-final-state` equal to their policy, and this
module writes other policies into that same object. As the install does, the objects are
created first (by the admin), compiled from the shipped policy.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial

import pytest
import yaml
from kubernetes import client

from tests.support.builders import MEM
from tests.support.builders import NAME as NAME_LABEL
from tests.support.cluster import require_binaries
from tests.support.paths import DEPLOY, EXAMPLE_POLICIES, SHIPPED_POLICY
from tools.cluster import controlplane
from tools.cluster.controlplane import ControlPlane
from tools.cluster.kubelet import Kubelet
from tools.cluster.processes import free_port
from tools.waiting import wait_for
from webhook.compile import final_state_check
from webhook.compile.final_state import NAME
from webhook.files import load_policies
from webhook.kube import admission_policies
from webhook.kube.client import api_client
from webhook.kube.inventory import NodeInventory
from webhook.server.state.discovery import Discovery
from webhook.sync.final_state import FinalStateSync

pytestmark = pytest.mark.cluster
LOG = "webhook.sync.final_state"
NAMESPACE, ACCOUNT = "lwgpu-system", "lwgpu-webhook"
USER = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
VAP, BINDING = "validatingadmissionpolicy", "validatingadmissionpolicybinding"
VAPS, BINDINGS = "validatingadmissionpolicies", "validatingadmissionpolicybindings"
SHIPPED = SHIPPED_POLICY.read_text()
# The shipped policy with one more way to ask memory: the check must refuse it too.
HAMI = "      nvidia.com/gpumem: Mi\n"
VRAM = SHIPPED.replace(HAMI, HAMI + "      example.com/vram: Mi\n")
# A policy the check cannot express (the classes are known only from the Nodes).
MAX = "  maxGPUsPerPod: 1\n"
DISCOVERS = SHIPPED.replace(MAX, MAX + "  discoverProfiles: true\n")
SHIPPED_CHECK = final_state_check(load_policies(SHIPPED_POLICY))
# A policy whose check has variables and match conditions the shipped one has not, and lacks
# some of the shipped one's.
CUSTOM = EXAMPLE_POLICIES / "mixed-fleet.yaml"


def shipped_sync_objects() -> list[dict]:
    """The webhook's ServiceAccount with the ClusterRoles bound to it, as deploy/base ships
    them, and the discovery option's read of the Nodes (a discovering policy needs it)."""
    discovery = DEPLOY / "components" / "discovery" / "discovery.yaml"
    files = (DEPLOY / "base" / "webhook.yaml", discovery)
    docs = [d for path in files for d in yaml.safe_load_all(path.read_text())]
    roles = ("lwgpu-policy-sync", "lwgpu-discovery")
    wanted = {("ServiceAccount", ACCOUNT)} | {
        (kind, role) for role in roles for kind in ("ClusterRole", "ClusterRoleBinding")
    }
    return [d for d in docs if d and (d["kind"], d["metadata"]["name"]) in wanted]


def as_list(objects: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[ControlPlane]:
    """A control plane of this module's own with the sidecar's identity and the objects."""
    require_binaries()
    with controlplane.running(tmp_path_factory.mktemp("sync-plane")) as started:
        started.kubectl("create", "namespace", NAMESPACE)
        started.kubectl("apply", "-f", "-", input=as_list(shipped_sync_objects()))
        yield started


@pytest.fixture(scope="module")
def identity(plane, tmp_path_factory):
    """A kubeconfig with a token of the webhook's ServiceAccount, once RBAC grants it."""
    path = Kubelet(plane, tmp_path_factory.mktemp("tokens")).token_kubeconfig(NAMESPACE, ACCOUNT)
    wait_for(
        lambda: can_i(plane, "patch", f"{VAPS}/{NAME}") == "yes",
        timeout=60,
        what="the sidecar's role to be bound",
    )
    return path


@pytest.fixture
def installed(plane) -> Iterator[None]:
    """The check as the install creates it: compiled from the shipped policy, by the admin."""
    objects = as_list(SHIPPED_CHECK)
    plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=objects)
    yield
    plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=objects)


def can_i(plane: ControlPlane, verb: str, resource: str) -> str:
    done = plane.kubectl("auth", "can-i", verb, resource, f"--as={USER}", check=False)
    return done.stdout.strip()


def stored(plane: ControlPlane, kind: str = VAP) -> dict:
    return json.loads(plane.kubectl("get", kind, NAME, "-o", "json").stdout)


def compiled_spec(text: str, tmp_path) -> dict:
    (tmp_path / "compiled.yaml").write_text(text)
    return final_state_check(load_policies(tmp_path / "compiled.yaml"))[0]["spec"]


def checks(spec: dict) -> tuple:
    """What the check decides with (the stored spec also holds the apiserver's defaults)."""
    return spec["variables"], spec["matchConditions"], spec["validations"]


@contextmanager
def syncing(directory, identity, **options) -> Iterator[FinalStateSync]:
    """`FinalStateSync` on `directory` running in a thread, as the sidecar's identity."""
    apply = partial(admission_policies.patch_objects, api_client(kubeconfig=str(identity)))
    sync = FinalStateSync(directory, apply, **options)
    stop = threading.Event()
    thread = threading.Thread(target=sync.run, args=(stop, 0.1), daemon=True)
    thread.start()
    try:
        yield sync
    finally:
        stop.set()
        thread.join(30)
        sync.discovery.stop()


def logged(caplog, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records if r.name == LOG)


def test_each_good_load_is_applied_and_any_other_keeps_the_last(
    plane, identity, installed, tmp_path, caplog
):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "default.yaml").write_text(SHIPPED)
    caplog.set_level(logging.INFO)
    with syncing(policies, identity, resync_s=3600):
        wait_for(lambda: logged(caplog, "applied the final-state check of policy generation 1"))
        assert checks(stored(plane)["spec"]) == checks(compiled_spec(SHIPPED, tmp_path))

        written = time.monotonic()
        (policies / "default.yaml").write_text(VRAM)
        wanted = checks(compiled_spec(VRAM, tmp_path))
        wait_for(lambda: checks(stored(plane)["spec"]) == wanted, timeout=30)
        print(f"policy file written -> check stored: {time.monotonic() - written:.2f}s")
        # the apiserver writes status (its type check) too: the spec is what must stay
        generation = stored(plane)["metadata"]["generation"]

        (policies / "default.yaml").write_text("spec: [unclosed")
        wait_for(lambda: logged(caplog, "the policy did not load"))
        time.sleep(1)  # ten more polls: the cause is logged once, nothing is applied

    kept = "the apiserver keeps the check applied from policy generation 2"
    assert logged(caplog, f"the policy did not load; {kept}") == 1
    assert stored(plane)["metadata"]["generation"] == generation


def inventory_as(kubeconfig) -> NodeInventory:
    """A started node inventory that reads the Nodes as `kubeconfig` says."""
    return NodeInventory(client.CoreV1Api(api_client(kubeconfig=str(kubeconfig)))).start()


def test_a_discovering_policy_is_compiled_with_the_classes_found_on_the_nodes(
    plane, identity, installed, tmp_path, caplog
):
    caplog.set_level(logging.INFO)
    (tmp_path / "default.yaml").write_text(DISCOVERS)
    nodes = client.CoreV1Api(plane.api())
    nodes.create_node({"metadata": {"name": "gpu-a", "labels": {MEM: "3072MiB", NAME_LABEL: "A"}}})
    discovery = Discovery(factory=lambda: inventory_as(identity))
    try:
        with syncing(tmp_path / "default.yaml", identity, discovery=discovery):
            wait_for(lambda: "3072MiB" in json.dumps(stored(plane)["spec"]), timeout=30)
            nodes.create_node(
                {"metadata": {"name": "gpu-b", "labels": {MEM: "6144MiB", NAME_LABEL: "B"}}}
            )
            wait_for(lambda: "6144MiB" in json.dumps(stored(plane)["spec"]), timeout=30)
    finally:
        for name in ("gpu-a", "gpu-b"):
            nodes.delete_node(name)
    assert logged(caplog, "policy generation 1 and 2 classes found:") == 1


def test_a_discovering_policy_with_no_list_of_nodes_keeps_the_check(
    plane, identity, installed, tmp_path, caplog
):
    (tmp_path / "default.yaml").write_text(DISCOVERS)
    unreachable = tmp_path / "unreachable.kubeconfig"
    config = yaml.safe_load(identity.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    unreachable.write_text(yaml.safe_dump(config))
    discovery = Discovery(factory=lambda: inventory_as(unreachable))
    with syncing(tmp_path / "default.yaml", identity, discovery=discovery) as sync:
        wait_for(lambda: logged(caplog, "policy generation 1 cannot be checked"))
        time.sleep(1)  # ten more polls: logged once, nothing applied
        assert sync.applied is None

    assert logged(caplog, "no snapshot of the Nodes was given") == 1
    assert stored(plane)["metadata"]["generation"] == 1


def test_what_the_install_wrote_is_replaced_whole(plane, identity, installed, caplog):
    """The install's field manager owns the items of the installed check's lists; a
    server-side apply that left some out would keep them. The merge patch replaces them."""
    caplog.set_level(logging.INFO)
    with syncing(CUSTOM, identity):
        wait_for(lambda: logged(caplog, "applied the final-state check"), timeout=30)

    custom = final_state_check(load_policies(CUSTOM))[0]["spec"]
    assert checks(stored(plane)["spec"]) == checks(custom) != checks(SHIPPED_CHECK[0]["spec"])


def test_an_api_refusal_is_retried_with_backoff_and_logged_once(
    plane, identity, installed, tmp_path, caplog
):
    """A missing binding is not made again: a merge patch never creates (nor may the
    sidecar)."""
    plane.kubectl("delete", BINDING, NAME)
    caplog.set_level(logging.DEBUG, logger=LOG)
    with syncing(SHIPPED_POLICY, identity, backoff=(0.1, 0.4)) as sync:
        wait_for(lambda: logged(caplog, "still cannot apply") >= 3, timeout=30)
        refused = [r.getMessage() for r in caplog.records if "cannot apply the" in r.getMessage()]
        assert sync.applied is None
        plane.kubectl("create", "-f", "-", input=json.dumps(SHIPPED_CHECK[1]))
        wait_for(lambda: sync.applied is not None, timeout=30)

    assert len(refused) == 1
    assert (
        f"ValidatingAdmissionPolicyBinding {NAME}: answered 404 Not Found:"
        f' validatingadmissionpolicybindings.admissionregistration.k8s.io "{NAME}" not found'
    ) in refused[0]
    assert logged(caplog, "the API server takes the check again") == 1


def test_another_writers_change_is_repaired_at_the_next_resync(plane, identity, installed, caplog):
    caplog.set_level(logging.INFO)
    with syncing(SHIPPED_POLICY, identity, resync_s=0.5):
        wait_for(lambda: logged(caplog, "applied the final-state check"))
        weakened = copy.deepcopy(SHIPPED_CHECK[0])
        weakened["spec"]["validations"] = weakened["spec"]["validations"][:1]
        plane.kubectl(
            "apply", "--server-side", "--force-conflicts", "--field-manager=helm", "-f", "-",
            input=json.dumps(weakened),
        )  # fmt: skip
        wait_for(lambda: logged(caplog, "another writer had changed the final-state check"))

    assert stored(plane)["spec"]["validations"] == SHIPPED_CHECK[0]["spec"]["validations"]


# verb, resource, whether the sidecar's identity may
RIGHTS = [
    ("patch", f"{VAPS}/{NAME}", "yes"),
    ("patch", f"{BINDINGS}/{NAME}", "yes"),
    ("get", f"{VAPS}/{NAME}", "no"),
    ("create", VAPS, "no"),
    ("create", BINDINGS, "no"),
    ("delete", f"{VAPS}/{NAME}", "no"),
    ("update", f"{VAPS}/{NAME}", "no"),
    ("patch", f"{VAPS}/other", "no"),
    ("patch", f"{BINDINGS}/other", "no"),
    ("patch", "mutatingwebhookconfigurations/lwgpu-mutate", "no"),
]


@pytest.mark.parametrize("verb, resource, allowed", RIGHTS)
def test_the_sidecar_may_patch_its_two_objects_and_nothing_else(
    plane, identity, verb, resource, allowed
):
    assert can_i(plane, verb, resource) == allowed


def test_an_apply_of_another_admission_policy_is_refused(plane, identity, installed):
    other = copy.deepcopy(SHIPPED_CHECK[0])
    other["metadata"]["name"] = "other"
    plane.kubectl("create", "-f", "-", input=json.dumps(other))
    try:
        with pytest.raises(admission_policies.PatchError) as refused:
            admission_policies.patch_objects(api_client(kubeconfig=str(identity)), [other])
    finally:
        plane.kubectl("delete", VAP, "other")
    assert f'User "{USER}" cannot patch resource "validatingadmissionpolicies"' in str(
        refused.value
    )
    # and its own, which exists, with patch alone
    assert admission_policies.patch_objects(api_client(kubeconfig=str(identity)), SHIPPED_CHECK)
