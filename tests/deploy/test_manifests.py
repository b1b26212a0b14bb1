"""The install in deploy/: rendered with the real `kubectl kustomize`, validated against the
Kubernetes schemas (kubernetes-validate, strict) and checked for what SPEC §8 asks of it.

Tests that render skip cleanly where kubectl is missing. cert-manager's Issuer and Certificate
are custom resources with no schema in kubernetes-validate: those are checked field by field.
"""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.support.deploy import (
    BASE,
    CERT_MANAGER,
    NS,
    SERVE_ARGS,
    WEBHOOKS,
    find,
    only_container,
    pod_template,
    render,
)
from tests.support.kubectl import requires_kubectl
from tests.support.paths import DEPLOY, REPO

IMAGE = "ghcr.io/lwgpu/lwgpu:0.1.0"
# matchConditions became GA in 1.30: the oldest version the install supports, and the newest.
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
CRD_GROUP = "cert-manager.io/"
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}
INSTALL_ARGS = [
    "install",
    "--namespace",
    NS,
    "--service",
    "lwgpu-webhook",
    "--secret",
    "lwgpu-webhook-tls",
    "--webhook-config",
    "lwgpu-mutate",
    "--webhook-config",
    "lwgpu-validate",
]
CERT_JOB_OBJECTS = {
    (k, "lwgpu-certs")
    for k in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding", "Job")
} | {("CronJob", "lwgpu-certs-rotate")}
BASE_OBJECTS = (
    CERT_JOB_OBJECTS
    | {
        ("Namespace", NS),
        ("ConfigMap", "lwgpu-policies"),
        ("MutatingWebhookConfiguration", "lwgpu-mutate"),
        ("ValidatingWebhookConfiguration", "lwgpu-validate"),
    }
    | {
        (k, "lwgpu-webhook")
        for k in (
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
        )
    }
    | {
        (k, "lwgpu-labeller")
        for k in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet")
    }
)
CERT_MANAGER_OBJECTS = {
    ("Issuer", "lwgpu-selfsigned"),
    ("Certificate", "lwgpu-ca"),
    ("Issuer", "lwgpu-ca"),
    ("Certificate", "lwgpu-webhook"),
}
WORKLOADS = [
    ("Deployment", "lwgpu-webhook"),
    ("DaemonSet", "lwgpu-labeller"),
    ("Job", "lwgpu-certs"),
    ("CronJob", "lwgpu-certs-rotate"),
]
NODES = {"apiGroups": [""], "resources": ["nodes"]}
ROLE_RULES = {
    ("ClusterRole", "lwgpu-webhook"): [{**NODES, "verbs": ["get", "list", "watch"]}],
    ("ClusterRole", "lwgpu-labeller"): [{**NODES, "verbs": ["get", "patch"]}],
    ("Role", "lwgpu-certs"): [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["lwgpu-webhook-tls"],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ],
    ("ClusterRole", "lwgpu-certs"): [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            "resourceNames": ["lwgpu-mutate", "lwgpu-validate"],
            "verbs": ["get", "patch"],
        }
    ],
}


@requires_kubectl
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("target", [BASE, CERT_MANAGER])
def test_every_object_validates_against_the_kubernetes_schema(target, version):
    errors, custom = [], set()
    for obj in render(target):
        if obj["apiVersion"].startswith(CRD_GROUP):
            custom.add(obj["kind"])  # no schema for custom resources; see the overlay tests
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {err.message}")
    assert errors == []
    assert custom == ({"Issuer", "Certificate"} if target == CERT_MANAGER else set())


@requires_kubectl
@pytest.mark.parametrize(
    "target, expected",
    [
        (BASE, BASE_OBJECTS),
        (CERT_MANAGER, BASE_OBJECTS - CERT_JOB_OBJECTS | CERT_MANAGER_OBJECTS),
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


POD_CHECKS = [  # (what, value read from the pod spec, expected)
    ("runAsNonRoot", lambda pod: pod["securityContext"]["runAsNonRoot"], True),
    ("non-root uid", lambda pod: pod["securityContext"]["runAsUser"] > 0, True),
    ("seccomp", lambda pod: pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault"),
    (
        "no host namespaces",
        lambda pod: [k for k in ("hostNetwork", "hostPID", "hostIPC") if pod.get(k)],
        [],
    ),
    ("no hostPath", lambda pod: [v for v in pod.get("volumes", []) if "hostPath" in v], []),
]
CONTAINER_CHECKS = [  # (what, value read from every container, expected)
    ("no privilege escalation", lambda c: c["securityContext"]["allowPrivilegeEscalation"], False),
    ("drop ALL", lambda c: c["securityContext"]["capabilities"], {"drop": ["ALL"]}),
    ("read-only root", lambda c: c["securityContext"]["readOnlyRootFilesystem"], True),
    ("not privileged", lambda c: c["securityContext"].get("privileged", False), False),
    ("no hostPort", lambda c: [p for p in c.get("ports", []) if "hostPort" in p], []),
    ("requests", lambda c: sorted(c["resources"]["requests"]), ["cpu", "memory"]),
    ("limits", lambda c: sorted(c["resources"]["limits"]), ["cpu", "memory"]),
    ("image", lambda c: c["image"], IMAGE),
]


@requires_kubectl
@pytest.mark.parametrize("what, read, expected", POD_CHECKS, ids=[c[0] for c in POD_CHECKS])
@pytest.mark.parametrize("kind, name", WORKLOADS)
def test_every_pod_meets_pod_security_restricted(kind, name, what, read, expected):
    assert read(pod_template(find(kind, name))["spec"]) == expected


@requires_kubectl
@pytest.mark.parametrize(
    "what, read, expected", CONTAINER_CHECKS, ids=[c[0] for c in CONTAINER_CHECKS]
)
@pytest.mark.parametrize("kind, name", WORKLOADS)
def test_every_container_is_locked_down_and_sized(kind, name, what, read, expected):
    assert read(only_container(kind, name)) == expected


DEPLOYMENT_CHECKS = [  # (what, value read from the Deployment and its container, expected)
    ("replicas", lambda d, c: d["spec"]["replicas"] >= 2, True),
    (
        "rollout keeps capacity",
        lambda d, c: d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
        0,
    ),
    (
        "anti-affinity",
        lambda d, c: [
            (
                t["podAffinityTerm"]["topologyKey"],
                t["podAffinityTerm"]["labelSelector"]["matchLabels"],
            )
            for t in d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
                "preferredDuringSchedulingIgnoredDuringExecution"
            ]
        ],
        [("kubernetes.io/hostname", {"app.kubernetes.io/name": "lwgpu-webhook"})],
    ),
    ("command", lambda d, c: (c["command"], c["args"]), (["python", "-m", "webhook"], SERVE_ARGS)),
    (
        "port",
        lambda d, c: c["ports"],
        [{"name": "https", "containerPort": 8443, "protocol": "TCP"}],
    ),
    (
        "readiness",
        lambda d, c: c["readinessProbe"]["httpGet"],
        {"scheme": "HTTPS", "path": "/readyz", "port": "https"},
    ),
    (
        "liveness",
        lambda d, c: c["livenessProbe"]["httpGet"],
        {"scheme": "HTTPS", "path": "/healthz", "port": "https"},
    ),
    (
        "mounts",
        lambda d, c: c["volumeMounts"],
        [  # whole directories: no subPath
            {"name": "tls", "mountPath": "/etc/lwgpu/tls", "readOnly": True},
            {"name": "policies", "mountPath": "/etc/lwgpu/policies", "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    ),
    (
        "volumes",
        lambda d, c: d["spec"]["template"]["spec"]["volumes"],
        [
            {"name": "tls", "secret": {"secretName": "lwgpu-webhook-tls", "defaultMode": 0o440}},
            {"name": "policies", "configMap": {"name": "lwgpu-policies"}},
            {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        ],
    ),
]


@requires_kubectl
@pytest.mark.parametrize(
    "what, read, expected", DEPLOYMENT_CHECKS, ids=[c[0] for c in DEPLOYMENT_CHECKS]
)
def test_webhook_deployment(what, read, expected):
    deployment = find("Deployment", "lwgpu-webhook")
    assert read(deployment, only_container("Deployment", "lwgpu-webhook")) == expected


@requires_kubectl
def test_disruption_budget_and_service_select_the_webhook_pods():
    deployment = find("Deployment", "lwgpu-webhook")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    pdb, service = find("PodDisruptionBudget", "lwgpu-webhook"), find("Service", "lwgpu-webhook")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert 1 <= pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [port] = service["spec"]["ports"]
    [container_port] = [
        p
        for p in only_container("Deployment", "lwgpu-webhook")["ports"]
        if p["name"] == port["targetPort"]
    ]
    assert (port["port"], container_port["containerPort"]) == (443, 8443)


@requires_kubectl
def test_policy_configmap_carries_the_shipped_policy_unhashed():
    configmap = find("ConfigMap", "lwgpu-policies")
    assert configmap["data"] == {"default.yaml": (REPO / "policies/default.yaml").read_text()}


def test_deploy_copy_of_the_policy_matches_policies_default():
    """kustomize cannot read ../../policies; the copy in deploy/base must not drift."""
    source = (REPO / "policies/default.yaml").read_text()
    assert (DEPLOY / "base/policies/default.yaml").read_text() == source, (
        "run: cp policies/default.yaml deploy/base/policies/default.yaml"
    )


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
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": role[1], "namespace": NS}]


@requires_kubectl
@pytest.mark.parametrize("kind, name", WORKLOADS)
def test_each_workload_runs_as_its_own_bound_service_account(kind, name):
    account = pod_template(find(kind, name))["spec"]["serviceAccountName"]
    assert ("ServiceAccount", account) in BASE_OBJECTS
    assert any(role[1] == account for role in ROLE_RULES)


LABELLER_CHECKS = [  # (what, value read from the labeller DaemonSet, expected)
    (
        "args",
        lambda c, pod: (c["command"], c["args"]),
        (["python", "-m", "webhook"], ["label-node", "--interval", "300"]),
    ),
    (
        "NODE_NAME",
        lambda c, pod: [e["valueFrom"] for e in c["env"] if e["name"] == "NODE_NAME"],
        [{"fieldRef": {"fieldPath": "spec.nodeName"}}],
    ),
    (
        "takes no GPU",
        lambda c, pod: [
            r for r in {**c["resources"]["requests"], **c["resources"]["limits"]} if "gpu" in r
        ],
        [],
    ),
    (
        "GPU nodes only",
        lambda c, pod: [
            t["matchExpressions"][0]["key"]
            for t in pod["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
        ],
        [
            "aliyun.accelerator/nvidia_count",
            "nvidia.com/gpu.present",
            "feature.node.kubernetes.io/pci-10de.present",
        ],
    ),
    (
        "tolerates GPU taint",
        lambda c, pod: [t["key"] for t in pod["tolerations"]],
        ["nvidia.com/gpu"],
    ),
]


@requires_kubectl
@pytest.mark.parametrize(
    "what, read, expected", LABELLER_CHECKS, ids=[c[0] for c in LABELLER_CHECKS]
)
def test_labeller_daemonset(what, read, expected):
    pod = pod_template(find("DaemonSet", "lwgpu-labeller"))["spec"]
    assert read(only_container("DaemonSet", "lwgpu-labeller"), pod) == expected


@requires_kubectl
def test_rotation_cronjob_runs_the_install_job_pod():
    job, cronjob = find("Job", "lwgpu-certs"), find("CronJob", "lwgpu-certs-rotate")
    assert only_container("Job", "lwgpu-certs")["args"] == INSTALL_ARGS
    assert pod_template(cronjob) == pod_template(job)
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"


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
    for kind, name, _, _ in WEBHOOKS:
        annotations = find(kind, name, CERT_MANAGER)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": f"{NS}/lwgpu-webhook"}
