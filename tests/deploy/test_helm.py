"""The Helm chart deploy/helm/lwgpu with a real helm 3.19 (tests/support/helm.py).

Each install path renders the same objects: the chart without its NetworkPolicy renders
`kubectl kustomize deploy/` less the Namespace (Helm stores its release in the namespace before
it creates anything, so the namespace cannot be one of the chart's objects), and its option
values give the overlays of the same names (every combination of the options:
tests/deploy/test_components.py). Every render lints with `--strict`,
validates against the Kubernetes schemas, and each value does what values.yaml says; bad values
are refused by values.schema.json before anything renders. The real kube-apiserver accepts
every render (tests/cluster/test_install.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.deploy.installs import NO_NETWORK_POLICY, normalised
from tests.support import helm
from tests.support.deploy import K8S_VERSIONS, kustomize, schema_errors
from tests.support.kubectl import requires_kubectl
from tests.support.paths import DEPLOY, EXAMPLE_POLICIES, SHIPPED_POLICY
from webhook import __version__

DIGEST = "sha256:" + "ab" * 32
VALUE_SETS = {  # name -> helm template arguments
    "default": [],
    "cert-manager": ["--set", "certificates.mode=cert-manager"],
    "monitoring": ["--set", "monitoring.enabled=true", "--set", "monitoring.labels.release=kps"],
    "minimal": ["--set", "labeller.enabled=false", "--set", "networkPolicy.enabled=false"],
    "pinned": ["--set", f"image.digest={DIGEST}", "--set", "image.tag=0.1.0"],
    "validating-webhook": ["--set", "validatingWebhook.enabled=true"],
    "discovery": ["--set", "discovery.enabled=true"],
    "policy": ["--set-file", f"policy={EXAMPLE_POLICIES / 'mixed-fleet.yaml'}"],
}


@pytest.fixture(scope="module")
def renders(helm_bin: Path) -> dict[str, list[dict]]:
    """The chart rendered with each value set."""
    return {name: helm.template(*args) for name, args in VALUE_SETS.items()}


@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_chart_lints_strictly(helm_bin: Path, values: str) -> None:
    args = [*helm.REQUIRED, *VALUE_SETS[values]]
    linted = helm.helm("lint", "--strict", str(helm.CHART), *args, check=False)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in linted.stdout


@requires_kubectl
@pytest.mark.parametrize(
    "values, target",
    [
        ("default", ""),
        ("cert-manager", "overlays/cert-manager"),
        ("monitoring", "overlays/monitoring"),
        ("validating-webhook", "overlays/validating-webhook"),
        ("discovery", "overlays/discovery"),
    ],
)
def test_chart_renders_what_kustomize_renders(helm_bin: Path, values: str, target: str) -> None:
    """Each overlay is the chart with that option (and no NetworkPolicy: its Component needs
    the apiserver's peers, tests/deploy/test_components.py)."""
    chart = normalised(helm.template(*VALUE_SETS[values], *NO_NETWORK_POLICY))
    if values == "monitoring":  # the one value kustomize has no counterpart of
        for kind in ("ServiceMonitor", "PrometheusRule"):
            assert chart[kind, "lwgpu-webhook"]["metadata"]["labels"].pop("release") == "kps"
    objects = kustomize(DEPLOY / target)
    assert [o["kind"] for o in objects if o["kind"] == "Namespace"] == ["Namespace"]
    assert chart == normalised(objects)


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("values", sorted(VALUE_SETS))
def test_every_rendered_object_validates(renders, values: str, version: str) -> None:
    errors, custom = schema_errors(renders[values], version)
    assert errors == []
    expected = {
        "cert-manager": {"Issuer", "Certificate"},
        "monitoring": {"ServiceMonitor", "PrometheusRule"},
    }
    assert custom == expected.get(values, set())


def workload_spec(objects: list[dict], kind: str, name: str) -> dict:
    """The pod spec of the named workload in a render."""
    [obj] = [o for o in objects if (o["kind"], o["metadata"]["name"]) == (kind, name)]
    spec = obj["spec"]["jobTemplate"]["spec"] if kind == "CronJob" else obj["spec"]
    return spec["template"]["spec"]


def kinds(objects: list[dict]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


def policies(objects: list[dict]) -> dict:
    """The data of ConfigMap lwgpu-policies, the policy the webhook serves."""
    [found] = [
        o for o in objects if (o["kind"], o["metadata"]["name"]) == ("ConfigMap", "lwgpu-policies")
    ]
    return found["data"]


POLICY_FILE = EXAMPLE_POLICIES / "mixed-fleet.yaml"
POLICY = POLICY_FILE.read_text(encoding="utf-8")
# (what, helm arguments, check of the render)
VALUE_EFFECTS: list[tuple[str, list[str], Callable[[list[dict]], bool]]] = [
    (
        "tag and digest pin the image",
        ["--set", "image.tag=0.2.0", "--set", f"image.digest={DIGEST}"],
        lambda objs: (
            {
                c["image"]
                for kind, name in [
                    ("Deployment", "lwgpu-webhook"),
                    ("DaemonSet", "lwgpu-labeller"),
                    ("Job", "lwgpu-certs"),
                    ("CronJob", "lwgpu-certs-rotate"),
                ]
                for c in workload_spec(objs, kind, name)["containers"]
            }
            == {f"ghcr.io/lwgpu/lwgpu:0.2.0@{DIGEST}"}
        ),
    ),
    (
        "no tag is the chart's appVersion",
        [],
        lambda objs: (
            workload_spec(objs, "Deployment", "lwgpu-webhook")["containers"][0]["image"]
            == f"ghcr.io/lwgpu/lwgpu:{__version__}"
        ),
    ),
    (
        "a digest drops checkov's unpinned-image skips",
        ["--set", f"image.digest={DIGEST}"],
        lambda objs: (
            not any(
                v.startswith(("CKV_K8S_43=", "CKV_K8S_15="))
                for o in objs
                for v in (o["metadata"].get("annotations") or {}).values()
            )
        ),
    ),
    (
        "replicas",
        ["--set", "webhook.replicas=3"],
        lambda objs: [o["spec"]["replicas"] for o in objs if o["kind"] == "Deployment"] == [3],
    ),
    (
        "one replica without the PodDisruptionBudget",
        ["--set", "webhook.replicas=1", "--set", "webhook.podDisruptionBudget.enabled=false"],
        lambda objs: (
            [o["spec"]["replicas"] for o in objs if o["kind"] == "Deployment"] == [1]
            and not any(o["kind"] == "PodDisruptionBudget" for o in objs)
        ),
    ),
    (
        "resources",
        ["--set", "webhook.resources.limits.memory=512Mi"],
        lambda objs: (
            workload_spec(objs, "Deployment", "lwgpu-webhook")["containers"][0]["resources"][
                "limits"
            ]
            == {"cpu": "1", "memory": "512Mi"}
        ),
    ),
    (
        "priorityClassName: the chart's own class by default, made with it",
        [],
        lambda objs: (
            workload_spec(objs, "Deployment", "lwgpu-webhook")["priorityClassName"]
            == "lwgpu-critical"
            and [o["metadata"]["name"] for o in objs if o["kind"] == "PriorityClass"]
            == ["lwgpu-critical"]
        ),
    ),
    (
        "priorityClassName: another class is used, none made",
        ["--set", "webhook.priorityClassName=system-cluster-critical"],
        lambda objs: (
            workload_spec(objs, "Deployment", "lwgpu-webhook")["priorityClassName"]
            == "system-cluster-critical"
            and not any(o["kind"] == "PriorityClass" for o in objs)
        ),
    ),
    (
        "priorityClassName: empty is none",
        ["--set", "webhook.priorityClassName="],
        lambda objs: (
            "priorityClassName" not in workload_spec(objs, "Deployment", "lwgpu-webhook")
            and not any(o["kind"] == "PriorityClass" for o in objs)
        ),
    ),
    (
        "discovery off (the default) grants no access to Nodes",
        [],
        lambda objs: (
            not any(
                o["kind"] == "ClusterRole"
                and "nodes" in r["resources"]
                and o["metadata"]["name"] != "lwgpu-labeller"
                for o in objs
                for r in o.get("rules", [])
            )
        ),
    ),
    (
        "an inline policy is what the webhook serves",
        ["--set-file", f"policy={POLICY_FILE}"],
        lambda objs: policies(objs) == {"default.yaml": POLICY},
    ),
    (
        "no policy serves the shipped default",
        [],
        lambda objs: policies(objs) == {"default.yaml": SHIPPED_POLICY.read_text(encoding="utf-8")},
    ),
    (
        "cert-manager replaces the installer Job and CronJob",
        ["--set", "certificates.mode=cert-manager"],
        lambda objs: (
            not {("Job", "lwgpu-certs"), ("CronJob", "lwgpu-certs-rotate")} & kinds(objs)
            and {("Certificate", "lwgpu-webhook"), ("Issuer", "lwgpu-ca")} <= kinds(objs)
        ),
    ),
    (
        "the labeller off leaves no labeller object",
        ["--set", "labeller.enabled=false"],
        lambda objs: not any("labeller" in name for _, name in kinds(objs)),
    ),
    (
        "the labeller's nodeSelector, tolerations, runtimeClassName, priorityClassName",
        [
            "--set",
            "labeller.nodeSelector.pool=gpu",
            "--set",
            "labeller.tolerations[0].operator=Exists",
            "--set",
            "labeller.runtimeClassName=nvidia",
            "--set",
            "labeller.priorityClassName=system-node-critical",
        ],
        lambda objs: (
            {
                k: v
                for k, v in workload_spec(objs, "DaemonSet", "lwgpu-labeller").items()
                if k in ("nodeSelector", "tolerations", "runtimeClassName", "priorityClassName")
            }
            == {
                "nodeSelector": {"pool": "gpu"},
                "tolerations": [{"operator": "Exists"}],
                "runtimeClassName": "nvidia",
                "priorityClassName": "system-node-critical",
            }
        ),
    ),
    (
        "the NetworkPolicy off leaves none",
        ["--set", "networkPolicy.enabled=false"],
        lambda objs: not any(o["kind"] == "NetworkPolicy" for o in objs),
    ),
    (
        "monitoring off (the default) leaves no monitoring object",
        [],
        lambda objs: (
            not {"ServiceMonitor", "PrometheusRule"} & {o["kind"] for o in objs}
            and ("ConfigMap", "lwgpu-dashboard") not in kinds(objs)
        ),
    ),
]


@pytest.mark.parametrize(
    "what, args, check", VALUE_EFFECTS, ids=[effect[0] for effect in VALUE_EFFECTS]
)
def test_each_value_does_what_values_yaml_says(
    helm_bin: Path, what: str, args: list[str], check: Callable[[list[dict]], bool]
) -> None:
    assert check(helm.template(*args)), what


BAD_VALUES = [  # (helm arguments, what helm's schema error must name)
    (["--set", "webhook.replicas=0"], "/webhook/replicas"),
    (["--set-string", "webhook.replicas=two"], "/webhook/replicas"),
    (["--set", "certificates.mode=vault"], "/certificates/mode"),
    (["--set", "image.digest=latest"], "/image/digest"),
    (["--set", "webhook.replica=2"], "replica"),
    (["--set", "labeller.enabled=yes-please"], "/labeller/enabled"),
    (["--set", "discovery.enabled=yes"], "/discovery/enabled"),
    (["--set", "webhook.priorityClassName=Not A Name"], "/webhook/priorityClassName"),
    # Either way out, each named: more replicas, or no PodDisruptionBudget to block drains.
    (["--set", "webhook.replicas=1"], "at '/webhook/replicas': minimum: got 1, want 2"),
    (["--set", "webhook.replicas=1"], "at '/webhook/podDisruptionBudget/enabled': value must be"),
    (["--set", "policy=3"], "/policy"),
]


@pytest.mark.parametrize("args, field", BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_schema_refuses_bad_values(helm_bin: Path, args: list[str], field: str) -> None:
    done = helm.helm("template", "lwgpu", str(helm.CHART), *args, check=False)
    assert done.returncode != 0
    assert done.stdout == ""
    assert "values don't meet the specifications of the schema" in done.stderr
    assert field in done.stderr, done.stderr
