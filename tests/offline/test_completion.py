"""`lwgpu completion bash|zsh`: the generated script is valid and completes what the parser has.

The bash script is checked by bash itself (`bash -n`) and then run the way bash runs a
completion function: COMP_WORDS and COMP_CWORD set, the function called, COMPREPLY read.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest

from tests.support.cli import run_cli

BASH = shutil.which("bash")
ZSH = shutil.which("zsh")
requires_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def script(shell: str) -> str:
    """The completion script `completion SHELL` prints (exit 0, nothing on stderr)."""
    code, out, err = run_cli("completion", shell)
    assert (code, err) == (0, "")
    return out


@requires_bash
def test_bash_script_is_valid(tmp_path):
    """bash parses the script without error."""
    path = tmp_path / "lwgpu.bash"
    path.write_text(script("bash"), encoding="utf-8")
    done = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def complete(tmp_path, words: list[str]) -> list[str]:
    """What the bash function offers for `words` (the last one is being typed)."""
    path = tmp_path / "lwgpu.bash"
    path.write_text(script("bash"), encoding="utf-8")
    line = " ".join(shlex.quote(w) for w in words)
    program = (
        f"source {shlex.quote(str(path))}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        '_lwgpu; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        [BASH, "--norc", "-c", program], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


@requires_bash
@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (
            ["lwgpu", ""],
            {"review", "policy", "serve", "label-node", "certs", "completion", "--version"},
        ),
        (["lwgpu", "re"], {"review"}),
        (["lwgpu", "policy", ""], {"check", "explain"}),
        (["lwgpu", "review", "--o"], {"--output"}),
        (["lwgpu", "review", "-o", ""], {"json", "yaml", "patch", "diff", "junit"}),
        (["lwgpu", "review", "x.yaml", "-n", "ns", "--output", "d"], {"diff"}),
        (["lwgpu", "policy", "check", "--n"], {"--nodes"}),
        (["lwgpu", "serve", "--client"], {"--client-ca"}),
        (["lwgpu", "completion", ""], {"bash", "zsh"}),
        (["lwgpu", "certs", ""], {"generate", "check", "install"}),
        (["lwgpu", "certs", "generate", "--key-type", ""], {"ecdsa-p256", "rsa-2048"}),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else None,
)
def test_bash_completes_from_the_parser(tmp_path, words, expected):
    """Sub-commands, nested sub-commands, options and an option's choices are offered."""
    offered = set(complete(tmp_path, words))
    assert expected <= offered
    if words[-1]:
        assert all(w.startswith(words[-1]) for w in offered)


@requires_bash
def test_bash_offers_files_for_review_paths(tmp_path):
    """A path argument of `review` completes file names."""
    (tmp_path / "deploy.yaml").write_text("kind: Pod\n", encoding="utf-8")
    assert "deploy.yaml" in complete(tmp_path, ["lwgpu", "review", "dep"])


def test_zsh_script_runs_the_bash_function_through_bashcompinit():
    """The zsh script loads bashcompinit and defines the same function."""
    out = script("zsh")
    assert "bashcompinit" in out
    assert script("bash") in out


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed (apt-get install -y zsh)")
def test_zsh_script_is_valid(tmp_path):
    """zsh parses the script without error."""
    path = tmp_path / "lwgpu.zsh"
    path.write_text(script("zsh"), encoding="utf-8")
    assert ZSH is not None
    done = subprocess.run([ZSH, "-n", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
