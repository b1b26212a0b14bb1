"""`lwgpu policy compile PATH... [-o yaml|json]`: the compiled objects as `kubectl apply -f -`
reads them, and the exit codes."""

from __future__ import annotations

import json

import yaml

from tests.support.cli import run_cli
from tests.support.golden import check_golden
from tests.support.paths import GOLDEN, SHIPPED_POLICY
from tests.support.policies import default_policies
from webhook.compile import final_state_check, rewrite_policy

COMPILED = final_state_check(default_policies()) + rewrite_policy(default_policies())
SPILLING = """\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: wide}
spec:
  placement: spillOver
  profiles: [{name: a, memory: 1Gi}, {name: b, memory: 2Gi}]
"""
DISCOVERING = """\
apiVersion: lwgpu.io/v1alpha1
kind: LightweightGPUPolicy
metadata: {name: found}
spec:
  discoverProfiles: true
  profiles: [{name: a, memory: 1Gi}]
"""


def test_yaml_is_a_stream_of_the_check_and_the_rewrite_with_their_bindings():
    code, out, err = run_cli("policy", "compile", str(SHIPPED_POLICY))
    assert (code, err) == (0, "")
    assert list(yaml.safe_load_all(out)) == COMPILED
    # CEL of several lines is written as people write it, as a literal block
    assert "    expression: |-\n" in out
    # the CEL itself, for review: LWGPU_UPDATE_GOLDEN=1 rewrites it after an intended change
    check_golden(GOLDEN / "compile" / "default.yaml", out)


def test_json_is_one_list():
    code, out, _ = run_cli("policy", "compile", "-o", "json", str(SHIPPED_POLICY))
    assert code == 0
    assert json.loads(out) == {
        "apiVersion": "v1",
        "kind": "List",
        "items": COMPILED,
    }


def test_a_feature_it_cannot_express_is_named_and_exits_1(tmp_path):
    path = tmp_path / "found.yaml"
    path.write_text(DISCOVERING)
    code, out, err = run_cli("policy", "compile", str(path))
    assert (code, out) == (1, "")
    assert err.startswith("python -m webhook policy compile: error: cannot compile: policy 'found'")
    assert "discoverProfiles: true" in err


def test_a_policy_only_the_check_can_express_prints_the_check_and_exits_1(tmp_path):
    path = tmp_path / "wide.yaml"
    path.write_text(SPILLING)
    code, out, err = run_cli("policy", "compile", str(path))
    assert code == 1
    assert [o["kind"] for o in yaml.safe_load_all(out)] == [
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    assert "cannot compile the rewrite, printing only the check: policy 'wide'" in err
    assert "placement: spillOver" in err


def test_policies_that_do_not_load_exit_2(tmp_path):
    code, out, err = run_cli("policy", "compile", str(tmp_path / "absent.yaml"))
    assert (code, out) == (2, "")
    assert "cannot load policies" in err
