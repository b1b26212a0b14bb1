"""The NetworkPolicy has no default for where the apiserver connects from, which differs per
platform and CNI: the chart refuses to render without `networkPolicy.apiserver`, naming it, its
examples and the docs, and renders each example values.yaml gives; the kustomize Component
carries a placeholder that is no CIDR, so the apiserver refuses the object until a patch gives
the peers (tests/cluster/test_network_policy.py shows the apiserver's words).
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.deploy.installs import build
from tests.support import helm
from tests.support.deploy import K8S_VERSIONS, schema_errors
from tests.support.kubectl import requires_kubectl
from webhook.api.types import KubeObject

# A commented example in values.yaml: "  #   apiserver:" and its "  #   - ..." peers.
EXAMPLE = re.compile(r"^  #   (apiserver:\n(?:  #   - .*\n)+)", re.MULTILINE)
VALUES = (helm.CHART / "values.yaml").read_text(encoding="utf-8")
EXAMPLES = [
    yaml.safe_load(re.sub(r"(?m)^  #   ", "", found[1]))["apiserver"]
    for found in EXAMPLE.finditer(VALUES)
]
PORT = [{"port": 8443, "protocol": "TCP"}]


def network_policy(objects: list[KubeObject]) -> KubeObject:
    """The one NetworkPolicy of a render."""
    [policy] = [o for o in objects if o["kind"] == "NetworkPolicy"]
    return policy


def test_values_yaml_gives_the_peers_of_each_platform_ack_first() -> None:
    assert len(EXAMPLES) == 6  # ACK, EKS, GKE, AKS, kubeadm/kind, k3s (Cilium: no ipBlock)
    assert EXAMPLES[0] == [{"ipBlock": {"cidr": "100.104.0.0/16"}}]


@pytest.mark.parametrize("peers", EXAMPLES, ids=lambda peers: json.dumps(peers))
def test_each_example_renders_a_valid_network_policy(helm_bin: Path, peers: list[dict]) -> None:
    policy = network_policy(
        helm.template("--set-json", f"networkPolicy.apiserver={json.dumps(peers)}")
    )
    assert policy["spec"]["ingress"][0] == {"from": peers, "ports": PORT}
    for version in K8S_VERSIONS:
        assert schema_errors([policy], version) == ([], set())


@pytest.mark.parametrize(
    "args",
    [[], ["--set-json", "networkPolicy.apiserver=[]"], ["--set", "networkPolicy.apiserver=null"]],
    ids=["unset", "empty", "null"],
)
def test_no_apiserver_peers_fail_the_render_naming_the_value(
    helm_bin: Path, args: list[str]
) -> None:
    done = helm.helm("template", helm.RELEASE, str(helm.CHART), *args, check=False)
    assert (done.returncode, done.stdout) == (1, "")
    for words in (
        "networkPolicy.apiserver is required",
        "values.yaml lists them for ACK (Terway), EKS, GKE, AKS, kubeadm/kind, k3s and Cilium",
        'docs/OPERATIONS.md, "NetworkPolicy"',
        "Or set networkPolicy.enabled=false.",
    ):
        assert words in done.stderr


def test_the_policy_admits_8443_of_every_pod_from_the_apiserver_and_prometheus(
    helm_bin: Path,
) -> None:
    spec = network_policy(helm.template())["spec"]
    assert (spec["podSelector"], spec["policyTypes"]) == ({}, ["Ingress"])
    prometheus = yaml.safe_load(VALUES)["networkPolicy"]["prometheus"]
    assert spec["ingress"] == [
        {"from": helm.APISERVER_PEERS, "ports": PORT},
        {"from": prometheus, "ports": PORT},
    ]


def test_no_prometheus_peers_leave_the_apiserver_rule_alone(helm_bin: Path) -> None:
    spec = network_policy(helm.template("--set-json", "networkPolicy.prometheus=[]"))["spec"]
    assert spec["ingress"] == [{"from": helm.APISERVER_PEERS, "ports": PORT}]


@requires_kubectl
def test_the_component_without_a_patch_carries_a_placeholder_that_is_no_cidr(
    tmp_path: Path,
) -> None:
    policy = network_policy(build(tmp_path, ["network-policy"], peers=False))
    [peer] = policy["spec"]["ingress"][0]["from"]
    placeholder = peer["ipBlock"]["cidr"]
    assert "deploy/components/network-policy" in placeholder
    with pytest.raises(ValueError):
        ipaddress.ip_network(placeholder)
