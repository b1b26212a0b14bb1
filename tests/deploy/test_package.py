"""`pip install .` works and the installed commands run from any directory (issue: ship it).

The package is installed with the venv's own pip into a temporary target, without build
isolation (the pinned setuptools of requirements-dev.txt builds it, nothing is fetched),
and its console scripts are run from a directory outside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.kubectl import requires_kubectl
from tests.support.paths import EXAMPLES, REPO
from webhook import __version__


@pytest.fixture(scope="module", name="installed")
def fixture_installed(tmp_path_factory):
    """(target directory, environment) of a fresh `pip install --target` of the checkout."""
    root = tmp_path_factory.mktemp("install")
    # pip builds a local directory in place: build from a copy so the checkout stays clean.
    source = root / "source"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis"
        ),
    )
    target = root / "target"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(target),
        "PATH": f"{target / 'bin'}:{os.environ['PATH']}",
    }
    return target, env


def run(installed, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    _, env = installed
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_the_wheel_holds_both_packages_and_the_shipped_policy(installed):
    target, _ = installed
    assert (target / "webhook" / "cli" / "__init__.py").is_file()
    assert (target / "certs" / "__main__.py").is_file()
    assert (target / "webhook" / "defaults" / "default.yaml").read_text() == (
        REPO / "policies" / "default.yaml"
    ).read_text()
    assert not (target / "tests").exists()


def test_version(installed, tmp_path):
    result = run(installed, "lwgpu", "--version", cwd=tmp_path)
    assert (result.returncode, result.stdout.strip()) == (0, f"lwgpu {__version__}")


def test_review_from_another_directory_uses_the_packaged_policy(installed, tmp_path):
    manifest = EXAMPLES / "cuda-sample-gpu-mem.yaml"
    result = run(installed, "lwgpu", "review", str(manifest), "-o", "json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [verdict] = json.loads(result.stdout)
    assert verdict["outcome"] == "mutated" and verdict["profile"] == "GRID-P4-2Q"
    shown = run(installed, "lwgpu", "review", "--help", cwd=tmp_path).stdout
    packaged = installed[0] / "webhook" / "defaults" / "default.yaml"
    assert str(packaged) in "".join(shown.split())  # the default named in --help, unwrapped


@requires_kubectl
def test_kubectl_plugin(installed, tmp_path):
    """kubectl runs `kubectl-lwgpu` from PATH for `kubectl lwgpu ...` (kubectl plugins)."""
    result = run(installed, "kubectl", "lwgpu", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: kubectl lwgpu ")
