"""The install, accepted as a whole by a real kube-apiserver, and RBAC that grants each of
lwgpu's components what its code asks of the API and no more.

`kubectl apply --server-side -k deploy/` is what the `lwgpu` fixture installs from. The Helm
chart's render and the overlays cannot be installed beside it without conflicts, so they are
applied with `--dry-run=server`: the apiserver decodes, defaults and validates every object
(webhook configurations included, whose matchConditions it compiles with its own CEL), runs
admission (Pod Security on the workloads' templates) and stores nothing. The chart is rendered
into a namespace of its own, so its namespaced objects are dry-run creates; its cluster-scoped
objects share their names with the installed ones and are dry-run updates of them.

The custom resources of the cert-manager and monitoring options are checked against the
published CRDs of cert-manager and the Prometheus operator (tests/data/crds/SOURCES.md), which
the `crds` fixture registers: the apiserver validates each Certificate, Issuer, ServiceMonitor
and PrometheusRule against its schema as it would in a cluster running those operators.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.support import helm
from tests.support.paths import DATA, DEPLOY
from tools.cluster.install import NAMESPACE, render

CHART_VALUES = {
    "default": [],
    "cert-manager": ["--set", "certificates.mode=cert-manager"],
    "monitoring": ["--set", "monitoring.enabled=true"],
    "validating-webhook": ["--set", "validatingWebhook.enabled=true"],
    "discovery": ["--set", "discovery.enabled=true"],
}
OVERLAYS = ["cert-manager", "monitoring", "validating-webhook", "discovery"]


def dry_run_apply(plane, objects: list[dict]):
    """`kubectl apply --server-side --dry-run=server -o json` of `objects`."""
    return plane.kubectl(
        "apply", "--server-side", "--dry-run=server", "-o", "json", "-f", "-",
        input="\n---\n".join(json.dumps(o) for o in objects), check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def helm_bin():
    """The helm binary (tests/support/helm.py); the chart's tests skip where none can be had."""
    try:
        return helm.helm_binary()
    except helm.HelmUnavailable as exc:
        pytest.skip(f"no helm: {exc}")


@pytest.fixture(scope="module")
def crds(lwgpu):
    """The CRDs of cert-manager and the Prometheus operator, registered and Established."""
    files = sorted((DATA / "crds").glob("*.yaml"))
    args = [a for f in files for a in ("-f", str(f))]
    lwgpu.plane.kubectl("apply", "--server-side", *args)
    lwgpu.plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *args)
    yield
    lwgpu.plane.kubectl("delete", "--wait=false", *args)


@pytest.fixture(scope="module")
def chart_namespace(lwgpu, control_plane):
    """A namespace for the chart's render, labelled as the install's own (README: Helm)."""
    name = f"lwgpu-chart-{os.getpid()}"
    labels = yaml.safe_load((DEPLOY / "base" / "namespace.yaml").read_text())["metadata"]["labels"]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    namespace["metadata"]["labels"] = labels
    control_plane.kubectl("create", "-f", "-", input=json.dumps(namespace))
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false")


def chart(namespace: str, values: list[str]) -> list[dict]:
    """The objects `helm template lwgpu deploy/helm/lwgpu -n <namespace> <values>` renders."""
    out = helm.helm(
        "template", helm.RELEASE, str(helm.CHART), "--namespace", namespace, *helm.REQUIRED, *values
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_every_object_of_the_kustomize_install_is_stored(lwgpu):
    objects = [o for o in yaml.safe_load_all(render(lwgpu.plane)) if o]
    # The certificate Job may be gone already: ttlSecondsAfterFinished (600) lets the
    # ttl-after-finished controller delete it, and the next `kubectl apply -k` makes it again.
    kept = [o for o in objects if o["kind"] != "Job"]
    found = lwgpu.plane.kubectl(
        "get", "-o", "json", "-f", "-", input="\n---\n".join(json.dumps(o) for o in kept)
    )
    stored = json.loads(found.stdout)
    items = stored["items"] if stored["kind"] == "List" else [stored]
    assert sorted((i["kind"], i["metadata"]["name"]) for i in items) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in kept
    )


def test_applying_the_install_again_conflicts_with_nothing_and_keeps_the_ca_bundle(lwgpu):
    """The certificate Job patched caBundle in as another field manager; the manifests leave
    it out, so a second `kubectl apply --server-side -k deploy/` keeps it (field ownership:
    staging/src/k8s.io/apimachinery/pkg/util/managedfields)."""
    objects = [o for o in yaml.safe_load_all(render(lwgpu.plane)) if o]
    done = dry_run_apply(lwgpu.plane, objects)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    applied = json.loads(done.stdout)["items"]
    bundles = {
        o["kind"]: o["webhooks"][0]["clientConfig"].get("caBundle")
        for o in applied
        if o["kind"].endswith("WebhookConfiguration")
    }
    installed = json.loads(
        lwgpu.plane.kubectl(
            "get", "mutatingwebhookconfiguration", "lwgpu-mutate", "-o", "json"
        ).stdout
    )["webhooks"][0]["clientConfig"]["caBundle"]
    assert bundles == {"MutatingWebhookConfiguration": installed}


@pytest.mark.parametrize("values", CHART_VALUES)
def test_the_charts_render_is_accepted_as_a_whole(helm_bin, lwgpu, crds, chart_namespace, values):
    objects = chart(chart_namespace, CHART_VALUES[values])

    done = dry_run_apply(lwgpu.plane, objects)

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no warning either (Pod Security's included)
    applied = json.loads(done.stdout)["items"]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in applied) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in objects
    )
    assert {o["metadata"].get("namespace") for o in applied if "namespace" in o["metadata"]} == {
        chart_namespace
    }


def test_a_cel_error_in_the_charts_match_conditions_is_refused(helm_bin, lwgpu, chart_namespace):
    """The dry run above does compile the matchConditions: a broken one is refused."""
    objects = chart(chart_namespace, [])
    text = json.dumps(objects).replace("r.contains('gpu')", "r.contains(1)")
    broken = [o for o in json.loads(text) if o["kind"] == "MutatingWebhookConfiguration"]

    done = dry_run_apply(lwgpu.plane, broken)

    assert done.returncode == 1
    assert (
        'The MutatingWebhookConfiguration "lwgpu-mutate" is invalid:'
        " webhooks[0].matchConditions[0].expression: Invalid value:" in done.stderr
    )
    expression = broken[0]["webhooks"][0]["matchConditions"][0]["expression"]
    line = next(n for n, text in enumerate(expression.splitlines(), 1) if "contains(1)" in text)
    assert f"compilation failed: ERROR: <input>:{line}:" in done.stderr
    assert "found no matching overload for 'contains' applied to 'dyn.(int)'" in done.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_is_accepted_as_a_whole(lwgpu, crds, overlay):
    objects = [
        o for o in yaml.safe_load_all(render(lwgpu.plane, DEPLOY / "overlays" / overlay)) if o
    ]
    # A Job's pod template is immutable: the option's Job (one more --webhook-config) can
    # replace the installed one only once the TTL controller removed it (certs.yaml).
    plain = [o for o in objects if not (overlay == "validating-webhook" and o["kind"] == "Job")]

    done = dry_run_apply(lwgpu.plane, plain)

    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert len(json.loads(done.stdout)["items"]) == len(plain)


# A field each option's custom resource must not carry, and what the CRD's schema says of it:
# the dry runs above pass because the schemas accept what the options write, not because
# nothing checks them (kubectl's --validate=strict asks the apiserver for fieldValidation=Strict).
BROKEN_CUSTOM = [
    ("cert-manager", "Certificate", "duration", 90, ".spec.duration: expected string, got"),
    (
        "monitoring",
        "ServiceMonitor",
        "endpoints",
        "metrics",
        ".spec.endpoints: expected list, got",
    ),
]


@pytest.mark.parametrize(("overlay", "kind", "field", "value", "error"), BROKEN_CUSTOM)
def test_the_crds_refuse_a_broken_custom_resource(lwgpu, crds, overlay, kind, field, value, error):
    objects = yaml.safe_load_all(render(lwgpu.plane, DEPLOY / "overlays" / overlay))
    broken = next(o for o in objects if o and o["kind"] == kind)
    broken["spec"][field] = value

    done = dry_run_apply(lwgpu.plane, [broken])

    assert done.returncode == 1
    assert error in done.stderr, done.stderr


SA = f"system:serviceaccount:{NAMESPACE}:"
# service account, verb, resource (/name), namespace (None: cluster-scoped, "*": every one),
# allowed. What each component's code asks of the API is allowed; what it must not do is not.
RBAC = [
    # webhook/kube/inventory.py, NodeInventory (list_node, and the watch on it), only with the
    # discovery option (tests/cluster/test_discovery_grant.py): the base install grants neither
    ("lwgpu-webhook", "list", "nodes", None, False),
    ("lwgpu-webhook", "watch", "nodes", None, False),
    ("lwgpu-webhook", "patch", "nodes", None, False),
    ("lwgpu-webhook", "get", "secrets/lwgpu-webhook-tls", NAMESPACE, False),  # mounted instead
    ("lwgpu-webhook", "get", "configmaps/lwgpu-policies", NAMESPACE, False),  # mounted instead
    ("lwgpu-webhook", "list", "pods", "*", False),
    # webhook/kube/admission_policies.py (the policy-sync sidecar, as the pod's account): apply
    # patches of the final-state check, which the install created; never a create
    ("lwgpu-webhook", "patch", "validatingadmissionpolicies/lwgpu-final-state", None, True),
    ("lwgpu-webhook", "patch", "validatingadmissionpolicybindings/lwgpu-final-state", None, True),
    ("lwgpu-webhook", "create", "validatingadmissionpolicies", None, False),
    ("lwgpu-webhook", "create", "validatingadmissionpolicybindings", None, False),
    ("lwgpu-webhook", "delete", "validatingadmissionpolicies/lwgpu-final-state", None, False),
    ("lwgpu-webhook", "patch", "validatingadmissionpolicies/other", None, False),
    ("lwgpu-webhook", "patch", "mutatingwebhookconfigurations/lwgpu-mutate", None, False),
    # webhook/node/labeller.py, ensure_labels: read_node and patch_node of its own node
    ("lwgpu-labeller", "get", "nodes/vgn5i-2q-1", None, True),
    ("lwgpu-labeller", "patch", "nodes/vgn5i-2q-1", None, True),
    ("lwgpu-labeller", "list", "nodes", None, False),
    ("lwgpu-labeller", "delete", "nodes/vgn5i-2q-1", None, False),
    ("lwgpu-labeller", "list", "secrets", "*", False),
    # certs/install.py: read, create or replace the Secret; read both kinds under each name
    # (_resolve), patch the caBundle (_patch_ca_bundle)
    ("lwgpu-certs", "get", "secrets/lwgpu-webhook-tls", NAMESPACE, True),
    ("lwgpu-certs", "update", "secrets/lwgpu-webhook-tls", NAMESPACE, True),
    ("lwgpu-certs", "create", "secrets", NAMESPACE, True),
    ("lwgpu-certs", "get", "mutatingwebhookconfigurations/lwgpu-mutate", None, True),
    ("lwgpu-certs", "get", "validatingwebhookconfigurations/lwgpu-mutate", None, True),
    ("lwgpu-certs", "get", "mutatingwebhookconfigurations/lwgpu-validate", None, True),
    ("lwgpu-certs", "get", "validatingwebhookconfigurations/lwgpu-validate", None, True),
    ("lwgpu-certs", "patch", "mutatingwebhookconfigurations/lwgpu-mutate", None, True),
    ("lwgpu-certs", "patch", "validatingwebhookconfigurations/lwgpu-validate", None, True),
    ("lwgpu-certs", "get", "secrets/other", NAMESPACE, False),
    ("lwgpu-certs", "list", "secrets", NAMESPACE, False),
    ("lwgpu-certs", "delete", "secrets/lwgpu-webhook-tls", NAMESPACE, False),
    ("lwgpu-certs", "delete", "secrets", "default", False),
    ("lwgpu-certs", "create", "secrets", "default", False),
    ("lwgpu-certs", "patch", "mutatingwebhookconfigurations/other", None, False),
    ("lwgpu-certs", "create", "mutatingwebhookconfigurations", None, False),
]


@pytest.mark.parametrize("account, verb, resource, namespace, allowed", RBAC)
def test_rbac_grants_each_component_what_its_code_uses(
    lwgpu, account, verb, resource, namespace, allowed
):
    # Impersonating a service account's user name adds its groups, as its token would
    # (staging/src/k8s.io/apiserver/pkg/endpoints/filters/impersonation.go).
    where = {None: [], "*": ["--all-namespaces"]}.get(namespace, ["-n", namespace])
    done = lwgpu.plane.kubectl(
        "auth", "can-i", verb, resource, *where, f"--as={SA}{account}", check=False
    )
    assert done.stdout.strip() == ("yes" if allowed else "no"), done.stderr
