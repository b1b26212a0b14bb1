"""The registry double (tests/fakes/apiserver_store.py) writes as kube-apiserver's
generic registry does (registry/store.go `Create`/`Update`/`Delete`, rest `BeforeCreate` /
`BeforeUpdate`), every write through the admission chain, and UPDATEs carry the stored object
as oldObject to the real webhook once it is installed.
"""

from __future__ import annotations

import copy

import pytest

from tests.fakes.apiserver_harness import Apiserver, Webhook
from tests.fakes.apiserver_install import running
from tests.fakes.apiserver_store import Store, StoreError
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.kubectl import requires_kubectl

MEM = "aliyun.com/gpu-mem"
DEPLOYMENT = workload("apps/v1", "Deployment", pod(gpu_mem(2)))
DEPLOY_KEY = ("apps", "Deployment", "default", "gpu")


def test_create_fills_what_before_create_fills():
    store = Store()
    generated = pod(gpu_mem(2))
    generated["metadata"] = {"generateName": "trainer-"}
    first, second = store.create(generated), store.create(generated)
    names = [first.obj["metadata"]["name"], second.obj["metadata"]["name"]]
    assert names[0] != names[1] and all(n.startswith("trainer-") and len(n) == 13 for n in names)
    meta = first.obj["metadata"]
    assert {"uid", "creationTimestamp", "resourceVersion"} <= set(meta)
    assert "generation" not in meta  # a Pod has none here
    assert store.create(DEPLOYMENT).obj["metadata"]["generation"] == 1
    assert store.get(DEPLOY_KEY) == store.objects[DEPLOY_KEY]


def test_a_pod_is_stored_defaulted_and_unreviewed_before_the_install():
    store = Store()
    stored = store.create(pod(gpu_mem(2))).obj
    assert stored["spec"]["containers"][0]["resources"] == {
        "limits": {MEM: 2},
        "requests": {MEM: 2},
    }
    assert store.requests[0].result.calls == []


# (case, object, words of the refusal)
REFUSED = [
    (
        "invalid",
        pod(container(limits={"nvidia.com/gpu": "2"}, requests={"nvidia.com/gpu": "1"})),
        'Pod "gpu" is invalid: spec.containers[0].resources.requests',
    ),
    ("schema-invalid", pod(container(resource={"limits": {}})), "strict decoding error"),
]


@pytest.mark.parametrize(("obj", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_refused_object_is_not_stored(obj, words):
    store = Store()
    result = store.create(obj)
    assert not result.allowed and result.message.startswith(words), result.message
    assert store.objects == {}


def test_a_second_create_of_a_name_already_exists():
    store = Store()
    store.create(DEPLOYMENT)
    with pytest.raises(StoreError, match=r'deployments\.apps "gpu" already exists') as error:
        store.create(DEPLOYMENT)
    assert error.value.reason == "AlreadyExists"
    assert [r.operation for r in store.requests] == ["CREATE", "CREATE"]  # admitted, then refused


def set_replicas(n: int):
    return lambda obj: obj["spec"].update(replicas=n)


def relabel(obj: dict) -> None:
    obj["metadata"]["labels"] = {"team": "ml"}


@pytest.mark.parametrize(
    ("edit", "generation"), [(set_replicas(3), 2), (relabel, 1)], ids=["spec", "metadata"]
)
def test_an_update_bumps_the_generation_only_for_a_spec_change_and_keeps_the_status(
    edit, generation
):
    store = Store()
    created = store.create(DEPLOYMENT).obj
    store.update_status(DEPLOY_KEY, {"collisionCount": 1})
    result = store.change(DEPLOY_KEY, lambda o: (edit(o), o.pop("status")))
    assert result.allowed
    stored = store.get(DEPLOY_KEY)
    assert stored["metadata"]["generation"] == generation
    assert stored["metadata"]["uid"] == created["metadata"]["uid"]
    assert stored["status"] == {"collisionCount": 1}
    assert [r.operation for r in store.requests] == ["CREATE", "UPDATE status", "UPDATE"]


def test_delete_waits_for_the_finalizers_and_their_removal_deletes():
    store = Store()
    store.create(copy.deepcopy(DEPLOYMENT) | {"metadata": {"name": "gpu", "finalizers": ["x/y"]}})
    store.delete(DEPLOY_KEY)
    assert store.get(DEPLOY_KEY)["metadata"]["deletionTimestamp"]
    result = store.change(DEPLOY_KEY, lambda o: o["metadata"].pop("finalizers"))
    assert result.allowed and store.get(DEPLOY_KEY) is None
    with pytest.raises(StoreError, match="not found"):
        store.delete(DEPLOY_KEY)


def test_scale_writes_the_subresource_without_admission():
    store = Store()
    store.create(DEPLOYMENT)
    scaled = store.scale(DEPLOY_KEY, 4)
    assert scaled["spec"]["replicas"] == 4 and scaled["metadata"]["generation"] == 2
    assert store.requests[-1].operation == "UPDATE scale" and store.requests[-1].result is None


def test_scale_refuses_to_pretend_when_a_rule_names_a_subresource():
    rule = {"operations": ["UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"]}
    hook = Webhook(
        {"name": "scale.example.com", "rules": [rule | {"resources": ["*/scale"]}]}, True
    )
    store = Store()
    store.create(DEPLOYMENT)
    store.install(Apiserver([hook], {}))
    with pytest.raises(NotImplementedError, match="subresources"):
        store.scale(DEPLOY_KEY, 4)


@pytest.fixture(scope="module")
def install(tmp_path_factory):
    with running(tmp_path_factory.mktemp("store")) as (apiserver, _):
        yield apiserver


@requires_kubectl
def test_after_install_an_update_sends_the_stored_object_as_old_object(install):
    """The real webhook leaves alone an UPDATE whose template equals oldObject's, which it can
    tell only from the oldObject the store sent; the same object as a CREATE is rewritten."""
    store = Store()
    store.create(DEPLOYMENT)  # before the webhook: stored as written
    store.install(install)
    update = store.change(DEPLOY_KEY, relabel)
    assert update.allowed and update.called == ["mutate.lwgpu.io", "validate.lwgpu.io"]
    assert update.patches == [] and MEM in str(store.get(DEPLOY_KEY)["spec"]["template"])
    fresh = store.create(workload("apps/v1", "Deployment", pod(gpu_mem(2)), name="other"))
    assert [name for name, _ in fresh.patches] == ["mutate.lwgpu.io"]
    assert MEM not in str(fresh.obj["spec"]["template"]["spec"])
