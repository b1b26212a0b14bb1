"""`python -m tools.lock`: write requirements.lock, every runtime dependency of the image, the
transitive ones included, pinned with the sha256 of each wheel the image may install.

requirements.txt pins what lwgpu imports. `pip download --only-binary=:all:` resolves the
whole set from it for CPython 3.11 on glibc Linux, as the base image runs it
(python:3.11-slim-bookworm: glibc 2.36, so any manylinux wheel up to 2.36), once per
architecture the image is built for, and every wheel it fetched is hashed: a requirement lists
the hash of its wheel on each architecture. deploy/Dockerfile installs the lock with
`--require-hashes --only-binary=:all:`, so a build gets exactly these files or fails; `make`
installs the development venv under it as constraints, so the tests run the versions the image
ships. tests/deploy/test_lock.py checks that it pins requirements.txt's versions and holds
every dependency of them.

Run it after changing requirements.txt (it reaches the package index: pip's own configuration
and certificates apply) and commit the result.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tools.paths import REPO

REQUIREMENTS = REPO / "requirements.txt"
LOCK = REPO / "requirements.lock"
PYTHON, ABIS = "3.11", ("cp311", "abi3", "none")
ARCHITECTURES = ("x86_64", "aarch64")
GLIBC_MINOR = 36  # Debian bookworm's glibc 2.36
# The wheel file name's distribution and version (PEP 427: name-version[-build]-tags.whl).
WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-")
HEADER = """\
# Every runtime dependency of the image, the transitive ones included, with the sha256 of
# each wheel (x86_64 and aarch64). Generated from requirements.txt by `python -m tools.lock`:
# do not edit; change requirements.txt and run it again. deploy/Dockerfile installs this file
# with --require-hashes --only-binary=:all:; `make` installs the venv under it.
"""


class LockError(Exception):
    """The architectures resolved different versions of a package."""


def platforms(arch: str) -> list[str]:
    """The manylinux platform tags a glibc-2.36 `arch` runs, newest first (pip does not derive
    older ones from a `--platform` it is given)."""
    perennial = [f"manylinux_2_{minor}_{arch}" for minor in range(GLIBC_MINOR, 4, -1)]
    return [*perennial, *(f"manylinux{legacy}_{arch}" for legacy in ("2014", "2010", "1"))]


def download(arch: str, into: Path) -> list[Path]:
    """The wheels pip resolves from requirements.txt for CPython 3.11 on `arch`."""
    command = [
        *(sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"),
        *("--only-binary=:all:", "--implementation", "cp", "--python-version", PYTHON),
        *(arg for abi in ABIS for arg in ("--abi", abi)),
        *(arg for platform in platforms(arch) for arg in ("--platform", platform)),
        *("--requirement", str(REQUIREMENTS), "--dest", str(into)),
    ]
    subprocess.run(command, check=True, timeout=900)
    return sorted(into.glob("*.whl"))


def normalised(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(wheels: Iterable[Path]) -> dict[str, tuple[str, set[str]]]:
    """name -> (version, sha256 of each of its wheels)."""
    found: dict[str, tuple[str, set[str]]] = {}
    for wheel in wheels:
        parts = WHEEL.match(wheel.name)
        if parts is None:
            raise LockError(f"{wheel.name} is not a wheel file name")
        name, version = normalised(parts["name"]), parts["version"]
        known, digests = found.setdefault(name, (version, set()))
        if known != version:
            raise LockError(f"{name}: {known} on one architecture, {version} on another")
        digests.add(hashlib.sha256(wheel.read_bytes()).hexdigest())
    return found


def render(found: dict[str, tuple[str, set[str]]]) -> str:
    """The lock file: the header, then one requirement per package with its hashes."""
    lines = [HEADER.rstrip("\n")]
    for name in sorted(found):
        version, digests = found[name]
        hashes = [f"    --hash=sha256:{digest}" for digest in sorted(digests)]
        lines += [f"{name}=={version} \\", *(f"{h} \\" for h in hashes[:-1]), hashes[-1]]
    return "\n".join(lines) + "\n"


def main() -> int:
    """Resolve, hash and write the lock; the process exit status."""
    with tempfile.TemporaryDirectory(prefix="lwgpu-lock-") as work:
        wheels = [w for arch in ARCHITECTURES for w in download(arch, Path(work) / arch)]
        try:
            found = pins(wheels)
        except LockError as error:
            print(f"tools.lock: {error}", file=sys.stderr)
            return 1
    LOCK.write_text(render(found))
    hashes = sum(len(digests) for _, digests in found.values())
    print(f"wrote {LOCK.relative_to(REPO)}: {len(found)} packages, {hashes} wheel hashes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
