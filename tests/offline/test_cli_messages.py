"""`python -m webhook` as a shell meets it: a missing sub-command is answered with the choices
(golden files, never argparse's internal `action`), and a reader that closes stdout early
(`... | head -1`) ends the command quietly with 141, as it ends `yes` or `cat`.

The pipes are real: a child process writes into a pipe whose reader has gone. Children run
without PYTHONUNBUFFERED (set on some machines, and in many images): with it, Python drops
the rest of a single large write that a reader cut short instead of raising, which
would let the second test pass without a closed pipe ever being seen.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.support.builders import container, pod
from tests.support.cli import run_cli
from tests.support.golden import check_golden
from tests.support.paths import GOLDEN, REPO
from webhook.cli.conventions import CLOSED_STDOUT_EXIT

BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@pytest.mark.parametrize("words", [[], ["policy"]], ids=["no-command", "policy"])
def test_a_missing_choice_lists_the_choices(words, monkeypatch):
    """Exit 2; stderr has the usage, what to choose and what each choice does."""
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps the usage line to the terminal
    code, out, err = run_cli(*words)
    assert (code, out) == (2, "")
    assert "arguments are required" not in err
    check_golden(GOLDEN / "cli" / f"missing-{'-'.join(['webhook', *words])}.txt", err)


def closed_before_writing(*argv: str) -> tuple[int, str]:
    """Run `python *argv` with stdout a pipe whose reader is already closed: (exit, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=BUFFERED,
            check=False,
            timeout=60,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


def test_completion_into_a_closed_pipe_ends_quietly():
    """`python -m webhook completion bash | head -0`: exit 141, nothing on stderr."""
    assert closed_before_writing("-m", "webhook", "completion", "bash") == (CLOSED_STDOUT_EXIT, "")


def test_review_yaml_read_one_line_then_closed(tmp_path):
    """`review -o yaml | head -1` on more output than a pipe holds: the reader takes one line
    and closes; the command exits 141 with no traceback on stderr."""
    pods = [pod(container(limits={"cpu": 1}), name=f"plain-{i}") for i in range(3000)]
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump_all(pods), encoding="utf-8")
    child = subprocess.Popen(
        [sys.executable, "-m", "webhook", "review", str(path), "-o", "yaml"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=BUFFERED,
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    child.stdout.close()
    err = child.stderr.read().decode()
    code = child.wait(timeout=120)
    assert first.strip() in (b"---", b"apiVersion: v1")
    assert (code, err) == (CLOSED_STDOUT_EXIT, "")
