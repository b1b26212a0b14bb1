"""Policy loading: golden `policy check` messages for bad policies, and namespace resolution.

Regenerate the golden files with LWGPU_UPDATE_GOLDEN=1 after an intended message change.
"""

import pytest

from tests.support.golden import check_golden
from tests.support.paths import DATA, EXAMPLE_POLICIES, GOLDEN, REPO
from webhook.cli import main
from webhook.compile.scope import NEVER_GOVERNED
from webhook.files import load_policies
from webhook.policy import PolicyError, PolicySet, load_documents
from webhook.policy.model import globs_overlap, pattern_rank

BAD = sorted((DATA / "policies" / "bad").glob("*.yaml"))


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_policy_check_golden(path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code = main(["policy", "check", str(path.relative_to(REPO))])
    out = capsys.readouterr().out
    assert code == 1
    check_golden(GOLDEN / "policy_check" / f"{path.stem}.txt", out)


def test_enough_kinds_of_bad_policy_are_covered():
    assert len(BAD) >= 8


# Each example is one fleet's policy, an alternative to the others: checked one by one (two
# whole-cluster examples in one directory would rightly clash).
EXAMPLES = sorted(str(p.relative_to(REPO)) for p in EXAMPLE_POLICIES.glob("*.yaml"))


@pytest.mark.parametrize("path", ["policies/default.yaml", *EXAMPLES])
def test_shipped_policies_are_valid(path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["policy", "check", path]) == 0
    assert capsys.readouterr().out.startswith("ok: ")


def test_default_policy_content():
    policy = load_policies(REPO / "policies/default.yaml").for_namespace("default")
    assert [(p.name, p.memory_mib, dict(p.node_selector)) for p in policy.profiles] == [
        (f"GRID-P4-{n}Q", n * 1024, {"aliyun.accelerator/nvidia_mem": f"{n * 1024}MiB"})
        for n in (1, 2, 4, 8)
    ]
    assert dict(policy.memory_resources) == {
        "aliyun.com/gpu-mem": 1 << 30,
        "nvidia.com/gpumem": 1 << 20,
    }
    assert policy.annotation == "lwgpu.io/gpu-memory"
    assert load_policies(REPO / "policies/default.yaml").for_namespace("kube-system") is None


def test_the_shipped_policy_governs_no_namespace_the_install_never_sends():
    """The install's namespaceSelector (and the compiled check's) leaves these out: a policy
    governing them would make `policy explain` and `review -n` describe what never happens."""
    shipped = load_policies(REPO / "policies/default.yaml")
    assert [ns for ns in NEVER_GOVERNED if shipped.for_namespace(ns) is not None] == []


def test_a_bad_file_in_a_directory_fails_the_whole_load(tmp_path):
    (tmp_path / "a.yaml").write_text((REPO / "policies/default.yaml").read_text())
    (tmp_path / "b.yml").write_text("kind: [")
    (tmp_path / "..data").mkdir()  # ConfigMap volume internals are hidden and ignored
    (tmp_path / "notes.txt").write_text("ignored")
    with pytest.raises(PolicyError) as err:
        load_policies(tmp_path)
    assert len(err.value.errors) == 1 and "b.yml" in err.value.errors[0]


def test_missing_path():
    with pytest.raises(PolicyError, match="no such file or directory"):
        load_policies("/nonexistent/policies")


def _policy(name, include, exclude=()):
    return (
        f"apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\nmetadata: {{name: {name}}}\n"
        f"spec:\n  namespaces: {{include: {list(include)}, exclude: {list(exclude)}}}\n"
        f"  profiles: [{{name: P, memory: 1Gi}}]\n---\n"
    )


TEAMS = "".join(
    [
        _policy("all", ["*"], ["kube-system"]),
        _policy("teams", ["team-*"]),
        _policy("team-a", ["team-a"]),
        _policy("ml", ["ml-?"], ["ml-x"]),
    ]
)


@pytest.mark.parametrize(
    "namespace, expected",
    [
        ("default", "all"),
        ("kube-system", None),
        ("team-b", "teams"),
        ("team-a", "team-a"),
        ("ml-1", "ml"),
        ("ml-x", "all"),  # excluded from 'ml', so the next most specific policy governs it
        ("team-", "teams"),
    ],
)
def test_most_specific_policy_governs(namespace, expected):
    errors = []
    policies = load_documents(TEAMS, "teams.yaml", errors)
    assert errors == []
    found = PolicySet(tuple(policies)).for_namespace(namespace)
    assert (found.name if found else None) == expected


@pytest.mark.parametrize(
    "a, b, overlap",
    [
        ("team-*", "*-prod", True),
        ("team-*", "ml-*", False),
        ("a?c", "ab*", True),
        ("a?c", "abd", False),
        ("*", "x", True),
        ("a*b*c", "*bx*", True),
        ("abc", "abcd", False),
    ],
)
def test_globs_overlap(a, b, overlap):
    assert globs_overlap(a, b) is overlap
    assert globs_overlap(b, a) is overlap


@pytest.mark.parametrize(
    "pattern, higher_than", [("team-a", "team-*"), ("team-*", "t*"), ("t*", "*"), ("a", "abc*")]
)
def test_pattern_rank(pattern, higher_than):
    assert pattern_rank(pattern) > pattern_rank(higher_than)


def test_the_policies_directory_is_what_the_server_serves(capsys, monkeypatch):
    """`policies/` loads as a whole (its Kustomization has no policy suffix), so it can be
    served or made into a ConfigMap as it is."""
    monkeypatch.chdir(REPO)
    assert main(["policy", "check", "policies"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("ok: policies/default.yaml#0: ")
