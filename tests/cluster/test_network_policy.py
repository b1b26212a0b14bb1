"""The NetworkPolicy Component on the real kube-apiserver: without the patch that gives the
apiserver's peers, the apiserver refuses the object, naming the field and showing the
placeholder's words (deploy/components/network-policy); with it, the one object is accepted.
Nothing enforces NetworkPolicy here (no CNI): what is checked is what `kubectl apply` says.
"""

from __future__ import annotations

import json

import pytest

from tests.deploy.installs import build
from tests.support import helm

pytestmark = pytest.mark.cluster


def dry_run_network_policy(plane, tmp_path, peers: bool):
    """`kubectl create --dry-run=server` of the Component's NetworkPolicy, patched or not."""
    objects = build(tmp_path, ["network-policy"], peers=peers)
    [policy] = [o for o in objects if o["kind"] == "NetworkPolicy"]
    return plane.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(policy),
        check=False,
    )  # fmt: skip


def test_without_the_apiserver_peers_the_apiserver_refuses_the_policy(lwgpu, tmp_path):
    done = dry_run_network_policy(lwgpu.plane, tmp_path, peers=False)
    assert (done.returncode, done.stderr) == (
        1,
        'The NetworkPolicy "lwgpu-ingress" is invalid: spec.ingress[0].from[0].ipBlock.cidr:'
        ' Invalid value: "replace with your apiserver\'s peers: deploy/components/network-policy":'
        " must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)\n",
    )


def test_with_the_peers_patched_in_the_policy_is_accepted(lwgpu, tmp_path):
    done = dry_run_network_policy(lwgpu.plane, tmp_path, peers=True)
    assert done.returncode == 0, done.stderr
    stored = json.loads(done.stdout)
    assert stored["spec"]["ingress"][0]["from"] == helm.APISERVER_PEERS
