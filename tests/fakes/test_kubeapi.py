"""The Kubernetes API double answers the real `kubernetes` client exactly as an apiserver would:
CRUD, `kind: Status` errors, conflicts, the three PATCH types and selectors (watches and faults:
test_kubeapi_watch.py).
"""

import json

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.builders import node

ADM = "admissionregistration.k8s.io/v1"
WEBHOOK = {
    "name": "pods.lwgpu.io",
    "admissionReviewVersions": ["v1"],
    "sideEffects": "None",
    "clientConfig": {"service": {"name": "lwgpu", "namespace": "lwgpu"}},
}


# (API class, method suffix, apiVersion, kind, namespace, body)
CRUD = [
    (
        client.CoreV1Api,
        "namespaced_secret",
        "v1",
        "Secret",
        "lwgpu",
        {
            "metadata": {"name": "tls"},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": "Y3J0", "tls.key": "a2V5"},
        },
    ),
    (
        client.CoreV1Api,
        "namespaced_config_map",
        "v1",
        "ConfigMap",
        "lwgpu",
        {"metadata": {"name": "policy"}, "data": {"a.yaml": "x: 1"}},
    ),
    (
        client.CoreV1Api,
        "node",
        "v1",
        "Node",
        None,
        {"metadata": {"name": "gpu-1", "labels": {"a": "b"}}},
    ),
    (
        client.AdmissionregistrationV1Api,
        "mutating_webhook_configuration",
        ADM,
        "MutatingWebhookConfiguration",
        None,
        {"metadata": {"name": "lwgpu"}, "webhooks": [WEBHOOK]},
    ),
    (
        client.AdmissionregistrationV1Api,
        "validating_webhook_configuration",
        ADM,
        "ValidatingWebhookConfiguration",
        None,
        {"metadata": {"name": "lwgpu"}, "webhooks": [WEBHOOK]},
    ),
]


@pytest.mark.parametrize(
    "api_class,suffix,gv,kind,namespace,body", CRUD, ids=[case[3] for case in CRUD]
)
def test_crud_round_trip_through_the_real_client(
    kube, api_class, suffix, gv, kind, namespace, body
):
    """Create, read, list and delete each supported resource; the deleted one reads 404."""
    api, scope = api_class(kube.api_client()), {"namespace": namespace} if namespace else {}

    def call(verb, **kwargs):
        return getattr(api, f"{verb}_{suffix}")(**scope, **kwargs)

    name = body["metadata"]["name"]
    made = call("create", body=body)
    assert made.metadata.uid and made.metadata.creation_timestamp
    assert call("read", name=name).metadata.resource_version == made.metadata.resource_version
    listed = call("list")
    assert [item.metadata.name for item in listed.items] == [name]
    assert int(listed.metadata.resource_version) >= int(made.metadata.resource_version)
    assert kube.get(gv, kind, name, namespace)["kind"] == kind
    with pytest.raises(ApiException) as err:
        call("create", body=body)
    assert (err.value.status, json.loads(err.value.body)["reason"]) == (409, "AlreadyExists")
    # this client types DELETE as `object`: the Status arrives as a dict
    assert call("delete", name=name)["status"] == "Success"
    with pytest.raises(ApiException) as err:
        call("read", name=name)
    assert err.value.status == 404
    assert json.loads(err.value.body)["message"].endswith(f'"{name}" not found')
    assert kube.get(gv, kind, name, namespace) is None


@pytest.mark.parametrize(
    "method,path,content_type,body,code,reason",
    [
        ("GET", "/api/v1/pods", None, None, 404, "NotFound"),
        ("GET", "/api/v1/namespaces/x/nodes/n", None, None, 404, "NotFound"),
        ("GET", "/api/v1/nodes?labelSelector=a%20b", None, None, 400, "BadRequest"),
        (
            "PATCH",
            "/api/v1/nodes/n",
            "application/apply-patch+yaml",
            b"{}",
            415,
            "UnsupportedMediaType",
        ),
        (
            "PATCH",
            "/api/v1/nodes/n",
            "application/json-patch+json",
            b'[{"op": "test", "path": "/metadata/name", "value": "other"}]',
            422,
            "Invalid",
        ),
        (
            "PATCH",
            "/api/v1/nodes/n",
            "application/merge-patch+json",
            b"{not json",
            400,
            "BadRequest",
        ),
        (
            "PUT",
            "/api/v1/nodes/n",
            "application/json",
            b'{"metadata": {"name": "m"}}',
            400,
            "BadRequest",
        ),
        (
            "POST",
            "/api/v1/namespaces/a/secrets",
            "application/json",
            b'{"metadata": {"name": "s", "namespace": "b"}}',
            400,
            "BadRequest",
        ),
        ("POST", "/api/v1/nodes", "application/json", b'{"metadata": {}}', 422, "Invalid"),
    ],
)
def test_wire_errors_are_status_objects(kube, method, path, content_type, body, code, reason):
    """Bad requests answer the apiserver's HTTP code with a `kind: Status` body."""
    kube.seed(node("n"))
    headers = {"Content-Type": content_type} if content_type else {}
    answer = urllib3.request(method, kube.url + path, body=body, headers=headers)
    status = json.loads(answer.data)
    assert (answer.status, status["kind"], status["code"], status["reason"]) == (
        code,
        "Status",
        code,
        reason,
    )


def test_generate_name_dry_run_and_all_namespaces(kube):
    """generateName gets a suffix; dryRun=All stores nothing; a list may span namespaces."""
    api = kube.core_v1()
    made = api.create_namespaced_config_map("a", {"metadata": {"generateName": "policy-"}})
    assert made.metadata.name.startswith("policy-") and len(made.metadata.name) == 12
    api.create_namespaced_config_map("b", {"metadata": {"name": "dry"}}, dry_run="All")
    api.create_namespaced_config_map("b", {"metadata": {"name": "kept"}})
    listed = api.list_config_map_for_all_namespaces()
    assert sorted((c.metadata.namespace, c.metadata.name) for c in listed.items) == [
        ("a", made.metadata.name),
        ("b", "kept"),
    ]


def test_stale_put_is_a_conflict_and_a_fresh_put_bumps_the_version(kube):
    """Optimistic concurrency: a PUT carrying an old resourceVersion answers 409 Conflict."""
    api = kube.core_v1()
    first = api.create_namespaced_config_map("ns", {"metadata": {"name": "c"}, "data": {"k": "1"}})
    first.data = {"k": "2"}
    second = api.replace_namespaced_config_map("c", "ns", first)
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    first.data = {"k": "3"}
    with pytest.raises(ApiException) as err:
        api.replace_namespaced_config_map("c", "ns", first)
    assert (err.value.status, json.loads(err.value.body)["reason"]) == (409, "Conflict")
    assert kube.get("v1", "ConfigMap", "c", "ns")["data"] == {"k": "2"}


@pytest.mark.parametrize(
    "content_type,patch,labels",
    [
        (
            "application/merge-patch+json",
            {"metadata": {"labels": {"a": None, "c": "3"}}},
            {"b": "2", "c": "3"},
        ),
        (
            "application/strategic-merge-patch+json",
            {"metadata": {"labels": {"c": "3"}}},
            {"a": "1", "b": "2", "c": "3"},
        ),
        (
            "application/json-patch+json",
            [{"op": "replace", "path": "/metadata/labels/a", "value": "9"}],
            {"a": "9", "b": "2"},
        ),
    ],
)
def test_patch_content_types(kube, content_type, patch, labels):
    """Each PATCH flavour reaches the double with its content type and applies its semantics."""
    kube.seed(node("n", a="1", b="2"))
    patched = kube.core_v1().patch_node("n", patch, _content_type=content_type)
    assert patched.metadata.labels == labels
    assert kube.requests[-1].content_type == content_type
    assert json.loads(kube.requests[-1].body) == patch


def test_strategic_merge_patches_webhooks_by_name(kube):
    """Like the real apiserver, a strategic merge keeps the webhook's other fields."""
    kube.seed(
        {
            "apiVersion": ADM,
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "lwgpu"},
            "webhooks": [WEBHOOK],
        }
    )
    patched = kube.admissionregistration_v1().patch_mutating_webhook_configuration(
        "lwgpu", {"webhooks": [{"name": WEBHOOK["name"], "clientConfig": {"caBundle": "Q0E="}}]}
    )
    assert patched.webhooks[0].client_config.ca_bundle == "Q0E="
    assert patched.webhooks[0].client_config.service.name == "lwgpu"
    assert patched.webhooks[0].admission_review_versions == ["v1"]


def test_noop_patch_keeps_the_resource_version(kube):
    """A patch that changes nothing writes nothing, as on the real apiserver."""
    rv = kube.seed(node("n", a="1"))["metadata"]["resourceVersion"]
    patched = kube.core_v1().patch_node(
        "n", {"metadata": {"labels": {"a": "1"}}}, _content_type="application/merge-patch+json"
    )
    assert patched.metadata.resource_version == rv


@pytest.mark.parametrize(
    "selector,names",
    [
        ("pool=gpu", ["a", "b"]),
        ("pool!=gpu", ["c"]),
        ("mem", ["a"]),
        ("!mem", ["b", "c"]),
        ("pool in (gpu,x),mem=2048MiB", ["a"]),
        ("pool notin (gpu)", ["c"]),
        ("", ["a", "b", "c"]),
    ],
)
def test_list_honours_label_selectors(kube, selector, names):
    """The label selector grammar the client sends filters LIST results."""
    for obj in (node("a", pool="gpu", mem="2048MiB"), node("b", pool="gpu"), node("c")):
        kube.seed(obj)
    listed = kube.core_v1().list_node(label_selector=selector)
    assert [n.metadata.name for n in listed.items] == names
    assert kube.requests[-1].query.get("labelSelector", "") == selector
