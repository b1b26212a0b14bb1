"""`policy explain NAMESPACE`: the governing policy, the pattern that decided, what it does."""

import pytest

from tests.support.cli import run_cli
from tests.support.paths import EXAMPLE_POLICIES, SHIPPED_POLICY

PER_TEAM = str(EXAMPLE_POLICIES / "per-team.yaml")


def test_the_shipped_policy_in_an_ordinary_namespace():
    code, out, _ = run_cli("policy", "explain", "team-a")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("namespace team-a: governed by policy 'default'")
    assert "included by '*'" in lines[2]
    assert "GRID-P4-1Q 1024Mi" in out and "aliyun.com/gpu-mem (units of 1Gi)" in out
    assert "more than 8192Mi is refused" in out
    assert "left alone: pods selecting ack.node.gpu.schedule" in out


def test_an_excluded_namespace_names_the_exclude_pattern():
    code, out, _ = run_cli("policy", "explain", "kube-system")
    assert code == 0
    assert "governed by no policy" in out.splitlines()[0]
    assert "excluded by 'kube-system'" in out


@pytest.mark.parametrize(
    ("namespace", "policy", "pattern"),
    [
        ("research", "research", "'research'"),
        ("research-nlp", "research", "'research-*'"),
        ("lab-07", "teaching", "'lab-??'"),
    ],
)
def test_per_team_policies(namespace, policy, pattern):
    """The most specific include wins, and explain names it."""
    code, out, _ = run_cli("policy", "explain", namespace, "--policies", PER_TEAM)
    assert code == 0
    assert out.splitlines()[0].startswith(f"namespace {namespace}: governed by policy {policy!r}")
    assert f"  {policy} (" in out and f"included by {pattern}" in out


def test_a_namespace_no_policy_claims():
    code, out, _ = run_cli("policy", "explain", "lab-123", "--policies", PER_TEAM)
    assert code == 0 and "governed by no policy" in out
    assert out.count("no include pattern matches") == 2


def test_unloadable_policies_exit_2(tmp_path):
    """Policies that do not load are input explain cannot read, as for review."""
    code, out, err = run_cli("policy", "explain", "x", "--policies", str(tmp_path / "none"))
    assert (code, out) == (2, "")
    assert err.startswith("python -m webhook policy explain: error: cannot load policies:\n")


SPILL_YAML = (EXAMPLE_POLICIES / "mixed-fleet.yaml").read_text()


@pytest.mark.parametrize(
    ("setting", "explained", "checked"),
    [
        ("exact", "placement: exact: the nodeSelector of the smallest class", ""),
        ("spillOver", "placement: spillOver: required affinity on every class", "; placement: "),
    ],
)
def test_explain_and_check_show_the_placement(tmp_path, setting, explained, checked):
    path = tmp_path / "policy.yaml"
    path.write_text(SPILL_YAML.replace("placement: exact", f"placement: {setting}"))
    code, out, _ = run_cli("policy", "explain", "team-a", "--policies", str(path))
    assert code == 0 and explained in out
    code, out, _ = run_cli("policy", "check", str(path))
    assert code == 0 and out.rstrip().endswith(
        "GRID-P4-8Q=8192Mi" + (checked and checked + setting)
    )


def test_a_misspelt_placement_is_a_load_error(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(SPILL_YAML.replace("placement: exact", "placement: spillover"))
    code, out, _ = run_cli("policy", "check", str(path))
    assert code == 1
    assert out == f"error: {path}#0: spec.placement: must be exact or spillOver, got 'spillover'\n"


@pytest.mark.parametrize("allow", [True, False])
def test_explain_says_when_skipping_is_not_allowed(tmp_path, allow):
    path = tmp_path / "policy.yaml"
    path.write_text(SHIPPED_POLICY.read_text() + f"  allowSkip: {str(allow).lower()}\n")
    code, out, _ = run_cli("policy", "explain", "team-a", "--policies", str(path))
    assert code == 0
    shown = "lwgpu.io/skip: ignored (allowSkip: false): no pod or workload opts out"
    assert (shown in out.splitlines()) is not allow
