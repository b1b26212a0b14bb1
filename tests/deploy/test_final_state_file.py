"""deploy/base/final-state.yaml, the final-state check the install creates, is what `policy
compile` makes of the shipped policies: the file is generated, and regenerated when the
compiler or the shipped policy changes (the failure says how).
"""

from __future__ import annotations

from tests.support.cli import run_cli
from tests.support.paths import DEPLOY, REPO

FILE = DEPLOY / "base" / "final-state.yaml"
REGENERATE = (
    "python -m webhook policy compile --only check policies/ > deploy/base/final-state.yaml"
)


def test_the_installed_check_is_the_shipped_policy_compiled():
    code, compiled, err = run_cli("policy", "compile", "--only", "check", str(REPO / "policies"))

    assert (code, err) == (0, "")
    assert FILE.read_text() == compiled, f"{FILE} is out of date; regenerate it: {REGENERATE}"
