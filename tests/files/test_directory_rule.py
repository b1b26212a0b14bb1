"""One directory rule for `serve --policies`, `policy check` and `review` (issue 16, item 7):
recursive, name order, any dot-name skipped (kubelet's `..data` and `..<timestamp>` dirs,
`.git`), `.yaml`/`.yml` for policies and also `.json` for review.
"""

import json

import pytest

from tests.support.builders import gpu_mem, pod
from tests.support.cli import run_cli
from webhook.files import MANIFEST_SUFFIXES, POLICY_SUFFIXES, files_under
from webhook.server.state.policy_store import PolicyStore


def policy(name, namespace):
    return (
        "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\n"
        f"metadata: {{name: {name}}}\nspec:\n  namespaces: {{include: [{namespace}]}}\n"
        "  profiles: [{name: GRID-P4-2Q, memory: 2Gi}]\n"
    )


# Every skipped file would break the load if read: a duplicate policy name, an equally
# specific claim, or text that is no policy at all.
TREE = {
    "b-team.yaml": policy("b", "b"),
    "a/z.yml": policy("az", "az"),
    "a/nested/c.yaml": policy("c", "c"),
    "a/.hidden/clash.yaml": policy("clash", "b"),
    "..data/b-team.yaml": policy("b", "b"),
    "..2024_01_01_00_00_00.1/b-team.yaml": policy("b", "b"),
    ".git/config.yaml": "[core]\n",
    ".b-team.yaml.swp": "not yaml: [",
    "README.md": "# notes\n",
    "pod.json": json.dumps(pod(gpu_mem(2), name="json-pod")),
}
IN_ORDER = ["a/nested/c.yaml", "a/z.yml", "b-team.yaml"]


@pytest.fixture
def tree(tmp_path):
    for name, text in TREE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("suffixes", "expected"),
    [(POLICY_SUFFIXES, IN_ORDER), (MANIFEST_SUFFIXES, [*IN_ORDER, "pod.json"])],
    ids=["policies", "manifests"],
)
def test_the_rule(tree, suffixes, expected):
    assert [str(p.relative_to(tree)) for p in files_under(tree, suffixes)] == expected


def test_linked_directories_are_followed_once(tree):
    """A ConfigMap key `team/x.yaml` shows as `team -> ..data/team`; a loop ends."""
    (tree / "..data" / "team").mkdir()
    (tree / "..data" / "team" / "x.yaml").write_text(policy("x", "x"))
    (tree / "team").symlink_to("..data/team")
    (tree / "a" / "loop").symlink_to("..")
    found = [str(p.relative_to(tree)) for p in files_under(tree, POLICY_SUFFIXES)]
    assert found == [*IN_ORDER, "team/x.yaml"]


def test_policy_check_reads_the_tree(tree):
    code, out, _ = run_cli("policy", "check", str(tree))
    assert code == 0, out
    assert [line.split(": ")[1] for line in out.splitlines()] == [
        f"{tree / name}#0" for name in IN_ORDER
    ]


def test_serve_policies_reads_the_tree(tree):
    store = PolicyStore(tree)
    assert store.poll(), store.error
    assert store.current is not None
    assert [p.name for p in store.current.policies] == ["c", "az", "b"]
    (tree / "a" / "nested" / "c.yaml").write_text(policy("c2", "c"))
    assert store.poll()  # a change in a sub-directory is a change
    assert [p.name for p in store.current.policies] == ["c2", "az", "b"]
    (tree / "a" / ".hidden" / "clash.yaml").write_text(policy("other", "c"))
    assert not store.poll()  # a change under a dot-directory is none


def test_review_reads_the_tree(tree):
    """Review reads the policies as manifests here: they are skipped, the pod is rewritten."""
    code, out, err = run_cli("review", str(tree), "-o", "json")
    assert code == 0, err
    wheres = [result["where"] for result in json.loads(out)]
    assert wheres == [f"{tree / name}#0" for name in [*IN_ORDER, "pod.json"]]
    assert json.loads(out)[-1]["outcome"] == "mutated"
