"""The workloads of the install in deploy/, as `kubectl kustomize` renders them: every pod and
container meets Pod Security "restricted" and is sized; the webhook Deployment, its disruption
budget and Service; the labeller DaemonSet (SPEC §8). Skipped where kubectl is missing.
"""

from __future__ import annotations

import pytest

from tests.support.deploy import (
    SERVE_ARGS,
    SYNC_ARGS,
    WORKLOADS,
    containers,
    find,
    named_container,
    only_container,
    pod_template,
)
from tests.support.kubectl import requires_kubectl
from webhook import __version__
from webhook.server.master import GRACEFUL_TIMEOUT_SECONDS

IMAGE = f"ghcr.io/lwgpu/lwgpu:{__version__}"  # the install runs this release's image


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
    for container in containers(kind, name):
        assert read(container) == expected, container["name"]


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
    (
        "zone spread, never blocking",
        lambda d, c: d["spec"]["template"]["spec"]["topologySpreadConstraints"],
        [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "lwgpu-webhook"}},
            }
        ],
    ),
    (
        "priority",
        lambda d, c: d["spec"]["template"]["spec"]["priorityClassName"],
        "lwgpu-critical",
    ),
    (
        "preStop pause, no command",
        lambda d, c: c["lifecycle"],
        {"preStop": {"sleep": {"seconds": 10}}},
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
            {
                "name": "tls",
                "secret": {
                    "secretName": "lwgpu-webhook-tls",
                    "defaultMode": 0o440,
                    # the serving pair only: no CA, no CA key, in the network-facing pod
                    "items": [{"key": k, "path": k} for k in ("tls.crt", "tls.key")],
                },
            },
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
    assert read(deployment, named_container("Deployment", "lwgpu-webhook", "webhook")) == expected


SIDECAR_CHECKS = [  # (what, value read from the policy-sync container, expected)
    ("command", lambda c: (c["command"], c["args"]), (["python", "-m", "webhook"], SYNC_ARGS)),
    # the policies the server serves, and nothing else: no certificate, no port
    ("mounts", lambda c: c["volumeMounts"], [
        {"name": "policies", "mountPath": "/etc/lwgpu/policies", "readOnly": True}
    ]),
    ("no port", lambda c: c.get("ports"), None),
    # a readiness probe would take the webhook out of its Service while the API is away
    ("no probes", lambda c: [k for k in c if k.endswith("Probe")], []),
]  # fmt: skip


@requires_kubectl
@pytest.mark.parametrize("what, read, expected", SIDECAR_CHECKS, ids=[c[0] for c in SIDECAR_CHECKS])
def test_policy_sync_sidecar(what, read, expected):
    assert read(named_container("Deployment", "lwgpu-webhook", "policy-sync")) == expected


@requires_kubectl
def test_a_stopping_webhook_pod_drains_before_it_is_killed():
    """The kubelet runs preStop, then sends SIGTERM, and SIGKILL when the grace period, counted
    from the start, runs out: it must cover the pause and gunicorn's graceful timeout for the
    reviews in flight. The sleep action must also be within the grace period to validate
    (pkg/apis/core/validation/validation.go, validateSleepAction)."""
    spec = pod_template(find("Deployment", "lwgpu-webhook"))["spec"]
    pause = named_container("Deployment", "lwgpu-webhook", "webhook")["lifecycle"]["preStop"]
    assert (
        spec["terminationGracePeriodSeconds"] > pause["sleep"]["seconds"] + GRACEFUL_TIMEOUT_SECONDS
    )


@requires_kubectl
def test_the_webhook_priority_class_is_the_highest_a_user_class_may_have():
    priority = find("PriorityClass", "lwgpu-critical")
    assert (priority["value"], priority["globalDefault"]) == (1_000_000_000, False)
    assert (
        pod_template(find("Deployment", "lwgpu-webhook"))["spec"]["priorityClassName"]
        == (priority["metadata"]["name"])
    )
    # Only the webhook: the other workloads wait on nothing of the cluster's.
    assert [
        name
        for kind, name in WORKLOADS
        if pod_template(find(kind, name))["spec"].get("priorityClassName") == "lwgpu-critical"
    ] == ["lwgpu-webhook"]


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
        for p in named_container("Deployment", "lwgpu-webhook", "webhook")["ports"]
        if p["name"] == port["targetPort"]
    ]
    assert (port["port"], container_port["containerPort"]) == (443, 8443)


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
