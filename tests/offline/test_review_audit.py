"""`mode: audit` in the commands: `policy check` and `policy explain` show the mode, and
`review` answers for an audited namespace what its webhook would answer: allowed, unchanged,
the `would-mutate` or `would-deny` verdict in `-o json` and lwgpu's `(audit)` warnings on
stderr, exit 0 (goldens in tests/golden/review/audit-*.txt).
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.offline.junit_schema import check_junit
from tests.support.builders import admission_review, container, gpu_mem, pod
from tests.support.cli import run_cli
from tests.support.golden import check_golden
from tests.support.paths import EXAMPLES, GOLDEN, SHIPPED_POLICY
from webhook.api.decoding import as_decoded

# The shipped policy's classes, auditing namespace `trial` (an exact name beats its `*`).
TRIAL = (
    SHIPPED_POLICY.read_text()
    .replace("name: default", "name: trial", 1)
    .replace('include: ["*"]', 'include: ["trial"]', 1)
    + "  mode: audit\n"
)
TOO_BIG = pod(gpu_mem(64), name="too-big")
HAMI = pod(container(limits={"nvidia.com/gpumem": 3000}), name="hami")


@pytest.fixture
def inputs(tmp_path, monkeypatch) -> list[str]:
    """The policies (`policies/`: shipped and trial) and the manifests, by relative names."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policies").mkdir()
    shutil.copy(SHIPPED_POLICY, tmp_path / "policies" / "default.yaml")
    (tmp_path / "policies" / "trial.yaml").write_text(TRIAL, encoding="utf-8")
    shutil.copy(EXAMPLES / "cuda-sample-gpu-mem.yaml", tmp_path / "deploy.yaml")
    (tmp_path / "too-big.yaml").write_text(yaml.safe_dump(TOO_BIG), encoding="utf-8")
    review = admission_review(HAMI, namespace="trial", uid="0b5e7d1c-0000-4000-8000-000000000031")
    (tmp_path / "review.json").write_text(json.dumps(review), encoding="utf-8")
    return ["deploy.yaml", "too-big.yaml", "review.json"]


def test_policy_check_shows_the_mode_it_is_not_the_default(inputs):
    code, out, _ = run_cli("policy", "check", "policies")
    assert code == 0
    assert out.splitlines() == [
        "ok: policies/default.yaml#0: policy 'default': GRID-P4-1Q=1024Mi, GRID-P4-2Q=2048Mi, "
        "GRID-P4-4Q=4096Mi, GRID-P4-8Q=8192Mi",
        "ok: policies/trial.yaml#0: policy 'trial': GRID-P4-1Q=1024Mi, GRID-P4-2Q=2048Mi, "
        "GRID-P4-4Q=4096Mi, GRID-P4-8Q=8192Mi; mode: audit",
    ]


@pytest.mark.parametrize(
    ("namespace", "mode"),
    [
        ("trial", "mode: audit: decides as below, but admits every object as it came"),
        ("team-a", "mode: enforce: rewrites and refuses as below"),
    ],
)
def test_policy_explain_shows_the_mode(inputs, namespace, mode):
    code, out, _ = run_cli("policy", "explain", namespace, "--policies", "policies")
    assert code == 0
    assert any(line.startswith(mode) for line in out.splitlines())


@pytest.mark.parametrize("fmt", ["json", "junit"])
def test_review_in_an_audited_namespace_golden(inputs, fmt):
    argv = ["review", *inputs, "--policies", "policies", "-n", "trial", "-o", fmt]
    code, out, err = run_cli(*argv)
    assert code == 0, err
    if fmt == "junit":
        check_junit(out)
    text = f"$ python -m webhook {' '.join(argv)}\nexit {code}\n--- stdout\n{out}--- stderr\n{err}"
    check_golden(GOLDEN / "review" / f"audit-{fmt}.txt", text)


def test_review_prints_audited_objects_as_sent(inputs):
    code, out, _ = run_cli("review", *inputs, "--policies", "policies", "-n", "trial")
    assert code == 0
    printed = list(yaml.safe_load_all(out))
    sent = [*yaml.safe_load_all((EXAMPLES / "cuda-sample-gpu-mem.yaml").read_text()), TOO_BIG]
    assert printed == [as_decoded(obj) for obj in sent] + [HAMI]


def test_the_same_objects_beside_it_are_rewritten_and_refused(inputs):
    code, out, err = run_cli("review", *inputs[:2], "--policies", "policies", "-o", "json")
    assert code == 1
    assert [v["outcome"] for v in json.loads(out)] == ["mutated", "denied"]
    assert "(audit)" not in err
