"""Every real manifest of `../shared/corpus/` goes through `webhook review` without a crash.

The verdict of each document (outcome, profile, first line of the reason or of the
warning) is kept in `tests/golden/corpus_verdicts.txt`, a file meant for people to
read: a change in any verdict shows up as a diff to review.

After an intended change of the decision, regenerate the golden file with

    LWGPU_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/offline/test_corpus.py

and read `git diff tests/golden/corpus_verdicts.txt` before committing it.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.golden import check_golden
from tests.support.manifests import corpus_files, documents
from tests.support.paths import CORPUS, GOLDEN, REPO
from webhook import DEFAULT_POLICIES

FILES = corpus_files()
HEADER = """\
# Verdicts of `python -m webhook review --policies policies/default.yaml -o json` on every
# document of ../shared/corpus/ (checked by tests/offline/test_corpus.py). Per document:
#   FILE#INDEX  KIND/NAMESPACE/NAME
#       OUTCOME  PROFILE  first line of the denial reason, warning or skip reason
# Regenerate: LWGPU_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q tests/offline/test_corpus.py
"""


@functools.cache
def review_file(path: Path) -> tuple[int, list[dict], str]:
    """Exit code, JSON verdicts and stderr of `webhook review PATH -o json` (run once per file)."""
    code, out, err = run_cli(
        "review", str(path), "--policies", str(DEFAULT_POLICIES), "--output", "json"
    )
    return code, (json.loads(out) if out.strip() else []), err


def verdict_lines(path: Path) -> list[str]:
    """The golden-file entry of one corpus file."""
    _, results, _ = review_file(path)
    lines = []
    for result in results:
        where = Path(result["where"]).name
        text = result["reason"] if result["outcome"] != "mutated" else result["warnings"][0]
        lines.append(f"{where}  {result['ref']}")
        lines.append(
            f"    {result['outcome']}  {result['profile'] or '-'}  {(text or '-').splitlines()[0]}"
        )
    return lines or [f"{path.name}  (no documents)"]


def test_the_corpus_is_there():
    """The shared corpus is present, so the tests below cannot pass on nothing."""
    assert len(FILES) >= 50, f"expected the shared corpus in {CORPUS}"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_review_decides_every_document(path):
    """Exit 0 or 1 (never 2 or a crash), one verdict per document, exit code matching them."""
    code, results, err = review_file(path)
    assert code in (0, 1), err
    assert "Traceback" not in err
    assert [r["where"] for r in results] == [d.where for d in documents(path)]
    assert code == (0 if all(r["allowed"] for r in results) else 1)
    for result in results:
        assert result["outcome"] in ("skipped", "allowed", "mutated", "denied")
        assert (result["outcome"] == "denied") == (not result["allowed"])
        assert bool(result["patch"]) == (result["outcome"] == "mutated")
        assert result["reason"] or result["warnings"]


def test_the_command_reviews_the_whole_corpus_directory():
    """The real entry point, given the corpus directory, reviews every document of every file."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "review",
            str(CORPUS),
            "--policies",
            str(DEFAULT_POLICIES),
            "--output",
            "json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # the corpus holds pods no lightweight GPU can run
    assert "Traceback" not in done.stderr
    per_file = [r for path in FILES for r in review_file(path)[1]]
    assert [(r["where"], r["outcome"]) for r in json.loads(done.stdout)] == [
        (r["where"], r["outcome"]) for r in per_file
    ]


def test_verdicts_match_the_golden_file():
    """The human-readable verdicts equal tests/golden/corpus_verdicts.txt."""
    text = HEADER + "".join("\n" + "\n".join(verdict_lines(p)) + "\n" for p in FILES)
    check_golden(GOLDEN / "corpus_verdicts.txt", text)
