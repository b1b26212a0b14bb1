"""The install in deploy/: rendered with the real `kubectl kustomize`, validated against the
Kubernetes schemas (kubernetes-validate, strict) and checked for what SPEC §8 asks of it: the
objects of each target, RBAC, the policy ConfigMap, certificates and the webhook configurations
(their workloads are checked in test_workloads.py).

Tests that render skip cleanly where kubectl is missing. cert-manager's Issuer and Certificate
are custom resources with no schema in kubernetes-validate: those are checked field by field.
"""

from __future__ import annotations

import pytest

from tests.support.deploy import (
    BASE,
    CERT_MANAGER,
    DISCOVERY,
    K8S_VERSIONS,
    NS,
    VALIDATING,
    WEBHOOKS,
    WORKLOADS,
    find,
    only_container,
    pod_template,
    render,
    schema_errors,
)
from tests.support.kubectl import requires_kubectl
from tests.support.paths import SHIPPED_POLICY

CLUSTER_SCOPED = {
    "Namespace",
    "PriorityClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}
INSTALL_ARGS = [
    "install",
    "--namespace",
    NS,
    "--service",
    "lwgpu-webhook",
    "--secret",
    "lwgpu-webhook-tls",
    "--ca-secret",
    "lwgpu-ca",
    "--ca-configmap",
    "lwgpu-ca-bundle",
    "--days",
    "90",
    "--ca-days",
    "1825",
    "--webhook-config",
    "lwgpu-mutate",
]
ROTATE_ARGS = [
    "rotate",
    *("--namespace", NS, "--service", "lwgpu-webhook", "--secret", "lwgpu-webhook-tls"),
    *("--ca-secret", "lwgpu-ca", "--days", "90"),
]
# With the validating webhook, the installer patches its caBundle too.
VALIDATING_INSTALL_ARGS = [*INSTALL_ARGS, "--webhook-config", "lwgpu-validate"]
CERT_JOB_OBJECTS = {
    (k, "lwgpu-certs")
    for k in (
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Job",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    )
} | {(k, "lwgpu-certs-rotate") for k in ("ServiceAccount", "Role", "RoleBinding", "CronJob")}
CERT_JOB_OBJECTS |= {
    (k, "lwgpu-certs-create")
    for k in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
}
BASE_OBJECTS = (
    CERT_JOB_OBJECTS
    | {
        ("Namespace", NS),
        ("ConfigMap", "lwgpu-policies"),
        ("MutatingWebhookConfiguration", "lwgpu-mutate"),
        ("ValidatingAdmissionPolicy", "lwgpu-final-state"),
        ("ValidatingAdmissionPolicyBinding", "lwgpu-final-state"),
        ("ValidatingAdmissionPolicy", "lwgpu-labeller-own-node"),
        ("ValidatingAdmissionPolicyBinding", "lwgpu-labeller-own-node"),
        ("PriorityClass", "lwgpu-critical"),
    }
    | {
        (k, "lwgpu-webhook")
        for k in (
            "ServiceAccount",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
        )
    }
    | {
        (k, "lwgpu-labeller")
        for k in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet")
    }
    | {(k, "lwgpu-policy-sync") for k in ("ClusterRole", "ClusterRoleBinding")}
)
CERT_MANAGER_OBJECTS = {
    ("Issuer", "lwgpu-selfsigned"),
    ("Certificate", "lwgpu-ca"),
    ("Issuer", "lwgpu-ca"),
    ("Certificate", "lwgpu-webhook"),
}
# The discovery option: read access to Nodes for the webhook, which the base does not grant.
DISCOVERY_OBJECTS = {("ClusterRole", "lwgpu-discovery"), ("ClusterRoleBinding", "lwgpu-discovery")}
NODES = {"apiGroups": [""], "resources": ["nodes"]}
ROLE_RULES = {
    ("ClusterRole", "lwgpu-labeller"): [{**NODES, "verbs": ["get", "patch"]}],
    ("Role", "lwgpu-certs"): [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["lwgpu-ca", "lwgpu-webhook-tls"],
            "verbs": ["get", "update"],
        },
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["lwgpu-ca-bundle"],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["create"]},
    ],
    # Reads the CA (its key signs), writes only the serving Secret: no create, no caBundle.
    ("Role", "lwgpu-certs-rotate"): [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["lwgpu-ca"],
            "verbs": ["get"],
        },
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["lwgpu-webhook-tls"],
            "verbs": ["get", "update"],
        },
    ],
    ("ClusterRole", "lwgpu-certs"): [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            "resourceNames": ["lwgpu-mutate", "lwgpu-validate"],
            "verbs": ["get", "patch"],
        }
    ],
    # patch alone: no create, so it can never make an admission policy of its own
    ("ClusterRole", "lwgpu-policy-sync"): [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
            "resourceNames": ["lwgpu-final-state"],
            "verbs": ["patch"],
        }
    ],
}
# The ServiceAccount each role is bound to: its own, but the policy-sync sidecar's and
# discovery's, which run in the webhook's pod and so as its ServiceAccount.
BOUND_TO = {"lwgpu-policy-sync": "lwgpu-webhook", "lwgpu-discovery": "lwgpu-webhook"}

WEBHOOK_RULES = [
    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]},
    {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["replicationcontrollers"],
        "operations": ["CREATE", "UPDATE"],
    },
    {
        "apiGroups": ["apps"],
        "apiVersions": ["v1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"],
    },
    {
        "apiGroups": ["batch"],
        "apiVersions": ["v1"],
        "resources": ["jobs", "cronjobs"],
        "operations": ["CREATE", "UPDATE"],
    },
]


@requires_kubectl
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("target", [BASE, CERT_MANAGER, VALIDATING, DISCOVERY])
def test_every_object_validates_against_the_kubernetes_schema(target, version):
    # No schema for custom resources; see the overlay tests.
    errors, custom = schema_errors(render(target), version)
    assert errors == []
    assert custom == ({"Issuer", "Certificate"} if target == CERT_MANAGER else set())


@requires_kubectl
@pytest.mark.parametrize(
    "target, expected",
    [
        (BASE, BASE_OBJECTS),
        (CERT_MANAGER, BASE_OBJECTS - CERT_JOB_OBJECTS | CERT_MANAGER_OBJECTS),
        (VALIDATING, BASE_OBJECTS | {("ValidatingWebhookConfiguration", "lwgpu-validate")}),
        (DISCOVERY, BASE_OBJECTS | DISCOVERY_OBJECTS),
    ],
)
def test_each_target_renders_exactly_the_expected_objects(target, expected):
    rendered = [(o["kind"], o["metadata"]["name"]) for o in render(target)]
    assert sorted(rendered) == sorted(expected)
    for obj in render(target):
        namespace = obj["metadata"].get("namespace")
        assert namespace == (None if obj["kind"] in CLUSTER_SCOPED else NS), obj["kind"]


@requires_kubectl
def test_deploy_root_renders_the_base():
    assert render(BASE) == render("base")


@requires_kubectl
def test_namespace_enforces_pod_security_restricted():
    labels = find("Namespace", NS)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


@requires_kubectl
def test_policy_configmap_carries_the_shipped_policy_unhashed():
    configmap = find("ConfigMap", "lwgpu-policies")
    assert configmap["data"] == {"default.yaml": SHIPPED_POLICY.read_text()}


@requires_kubectl
@pytest.mark.parametrize("target", [BASE, CERT_MANAGER])
def test_no_rbac_rule_uses_a_wildcard(target):
    rules = [
        rule for o in render(target) if o["kind"] in ("Role", "ClusterRole") for rule in o["rules"]
    ]
    assert rules and not [r for r in rules if any("*" in values for values in r.values())]


@requires_kubectl
@pytest.mark.parametrize("role, rules", ROLE_RULES.items(), ids=[n for _, n in ROLE_RULES])
def test_rbac_is_least_privilege(role, rules):
    assert find(*role)["rules"] == rules
    binding = find(f"{role[0]}Binding", role[1])
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role[0],
        "name": role[1],
    }
    account = BOUND_TO.get(role[1], role[1])
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NS}]


@requires_kubectl
@pytest.mark.parametrize("kind, name", WORKLOADS)
def test_each_workload_runs_as_its_own_bound_service_account(kind, name):
    account = pod_template(find(kind, name))["spec"]["serviceAccountName"]
    assert ("ServiceAccount", account) in BASE_OBJECTS
    assert account in {BOUND_TO.get(role, role) for _, role in ROLE_RULES}


@requires_kubectl
def test_only_the_discovery_option_lets_the_webhook_read_nodes():
    """The base grants no rule on Nodes but the labeller's (which patches its own); the option
    adds list and watch, what the node inventory uses (webhook/kube/inventory.py), for the
    webhook's ServiceAccount, and leaves every other object as the base renders it."""

    def on_nodes(target):
        return {
            o["metadata"]["name"]
            for o in render(target)
            if o["kind"] == "ClusterRole" and any("nodes" in r["resources"] for r in o["rules"])
        }

    assert on_nodes(BASE) == {"lwgpu-labeller"}
    assert on_nodes(DISCOVERY) == {"lwgpu-labeller", "lwgpu-discovery"}
    assert find("ClusterRole", "lwgpu-discovery", DISCOVERY)["rules"] == [
        {**NODES, "verbs": ["list", "watch"]}
    ]
    binding = find("ClusterRoleBinding", "lwgpu-discovery", DISCOVERY)
    assert binding["roleRef"]["name"] == "lwgpu-discovery"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "lwgpu-webhook", "namespace": NS}
    ]
    added = [
        o for o in render(DISCOVERY) if (o["kind"], o["metadata"]["name"]) in DISCOVERY_OBJECTS
    ]
    assert [o for o in render(DISCOVERY) if o not in added] == list(render(BASE))


def without_identity(template: dict) -> dict:
    """A pod template less its ServiceAccount, name label and command arguments."""
    spec = {**template["spec"], "serviceAccountName": None}
    spec["containers"] = [{**c, "args": None} for c in spec["containers"]]
    return {"spec": spec}


@requires_kubectl
def test_rotation_cronjob_runs_the_install_job_pod_as_its_own_identity():
    job, cronjob = find("Job", "lwgpu-certs"), find("CronJob", "lwgpu-certs-rotate")
    assert only_container("Job", "lwgpu-certs")["args"] == INSTALL_ARGS
    assert only_container("CronJob", "lwgpu-certs-rotate")["args"] == ROTATE_ARGS
    assert without_identity(pod_template(cronjob)) == without_identity(pod_template(job))
    assert pod_template(cronjob)["spec"]["serviceAccountName"] == "lwgpu-certs-rotate"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


@requires_kubectl
@pytest.mark.parametrize("target", [BASE, VALIDATING])
def test_the_certificate_policy_confines_the_certificate_identities_to_the_webhooks(target):
    """Which requests ValidatingAdmissionPolicy lwgpu-certs sees (what it refuses is tested
    on the real apiserver, tests/cluster/test_certs_confinement.py)."""
    spec = find("ValidatingAdmissionPolicy", "lwgpu-certs", target)["spec"]
    [rule] = spec["matchConstraints"]["resourceRules"]
    webhooks = {name for kind, name, *_ in WEBHOOKS}
    assert (rule["apiGroups"], set(rule["resourceNames"])) == (
        ["admissionregistration.k8s.io"],
        webhooks,
    )
    assert spec["failurePolicy"] == "Fail"
    accounts = [f"system:serviceaccount:{NS}:{a}" for a in ("lwgpu-certs", "lwgpu-certs-rotate")]
    [condition] = spec["matchConditions"]
    assert all(f"'{account}'" in condition["expression"] for account in accounts)
    binding = find("ValidatingAdmissionPolicyBinding", "lwgpu-certs", target)["spec"]
    assert binding == {"policyName": "lwgpu-certs", "validationActions": ["Deny"]}


@requires_kubectl
def test_cert_manager_chain_issues_the_mounted_secret_and_injects_its_ca():
    def spec(kind, name):
        return find(kind, name, CERT_MANAGER)["spec"]

    serving, ca = spec("Certificate", "lwgpu-webhook"), spec("Certificate", "lwgpu-ca")
    assert serving["secretName"] == "lwgpu-webhook-tls"
    assert f"lwgpu-webhook.{NS}.svc" in serving["dnsNames"]
    assert "server auth" in serving["usages"]
    assert spec("Issuer", serving["issuerRef"]["name"])["ca"]["secretName"] == ca["secretName"]
    assert ca["isCA"] is True
    assert spec("Issuer", ca["issuerRef"]["name"]) == {"selfSigned": {}}
    annotations = find("MutatingWebhookConfiguration", "lwgpu-mutate", CERT_MANAGER)["metadata"]
    assert annotations["annotations"] == {"cert-manager.io/inject-ca-from": f"{NS}/lwgpu-webhook"}


@requires_kubectl
def test_the_validating_webhook_option_has_its_cabundle_patched_too():
    job = find("Job", "lwgpu-certs", VALIDATING)
    assert pod_template(job)["spec"]["containers"][0]["args"] == VALIDATING_INSTALL_ARGS
    cronjob = find("CronJob", "lwgpu-certs-rotate", VALIDATING)
    assert pod_template(cronjob)["spec"]["containers"][0]["args"] == ROTATE_ARGS


@requires_kubectl
@pytest.mark.parametrize("kind, name, path, failure_policy, target", WEBHOOKS)
def test_webhook_configuration(kind, name, path, failure_policy, target):
    [webhook] = find(kind, name, target)["webhooks"]
    assert webhook["clientConfig"] == {
        "service": {"name": "lwgpu-webhook", "namespace": NS, "path": path, "port": 443}
    }
    assert (webhook["sideEffects"], webhook["admissionReviewVersions"]) == ("None", ["v1"])
    assert webhook["timeoutSeconds"] <= 10
    assert webhook["failurePolicy"] == failure_policy
    reinvocation = "IfNeeded" if kind.startswith("Mutating") else None
    assert webhook.get("reinvocationPolicy") == reinvocation
    assert [{**r, "scope": "Namespaced"} for r in WEBHOOK_RULES] == webhook["rules"]
    assert webhook["namespaceSelector"] == {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", NS],
            }
        ]
    }
    assert [c["name"] for c in webhook["matchConditions"]] == [
        "mentions-gpu",
        "not-left-alone-whatever-it-holds",
    ]


@requires_kubectl
@pytest.mark.parametrize("key", ["matchConditions", "namespaceSelector", "rules"])
def test_both_webhooks_send_the_same_objects(key):
    [mutate], [validate] = (find(kind, name, VALIDATING)["webhooks"] for kind, name, *_ in WEBHOOKS)
    assert mutate[key] == validate[key]
