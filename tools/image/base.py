"""The base image the test builds on, made here since no registry is used: a Debian bookworm
root with python3 3.11 and its venv module (what deploy/Dockerfile needs of PYTHON_IMAGE),
made by mmdebstrap, cached as a tarball under build/image/ and imported into podman.

python:3.11-slim-bookworm, the default base, is Debian bookworm too; its python lives in
/usr/local/bin where this one is /usr/bin, which the Dockerfile allows for.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tools.image.programs import podman, podman_ok, run_logged

SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
# With updates and security fixes, as the python images are rebuilt with them.
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
# Nothing in the image reads documentation or translations (python:3.11-slim has none either).
EXCLUDED = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
# A tarball imports with an empty configuration; these are the python images' own settings.
CONFIG = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
)


def mmdebstrap_command(tarball: Path) -> list[str]:
    """The mmdebstrap command that writes the base root filesystem to ``tarball``."""
    return [
        "mmdebstrap",
        # Essential packages and what PACKAGES need, no apt: nothing is installed at run time.
        "--variant=essential",
        "--format=tar",
        f"--include={','.join(PACKAGES)}",
        *(f"--dpkgopt=path-exclude={path}" for path in EXCLUDED),
        SUITE,
        str(tarball),
        *MIRRORS,
    ]


def _recipe() -> str:
    """A short digest of the command and configuration, so that changing either makes a new
    base."""
    recipe = json.dumps([mmdebstrap_command(Path()), CONFIG])
    return hashlib.sha256(recipe.encode()).hexdigest()[:12]


def base_image(cache: Path, log: Path) -> tuple[str, bool]:
    """The podman name of the base image and whether its root filesystem was cached; makes the
    tarball (about 40 s) unless a run with the same recipe made it, imports it unless podman
    has it."""
    recipe = _recipe()
    tarball = cache / f"base-{recipe}.tar"
    name = f"localhost/lwgpu-image-test-base:{recipe}"
    cached = tarball.exists()
    if not cached:
        log.write_text("")
        # Written aside and renamed, so an interrupted run leaves no half tarball to reuse.
        partial = cache / f"base-{recipe}.tar.partial"
        partial.unlink(missing_ok=True)
        run_logged(mmdebstrap_command(partial), log, timeout=900)
        partial.rename(tarball)
        for old in cache.glob("base-*.tar"):
            if old != tarball:
                old.unlink()
    if not cached or podman("image", "exists", name).returncode != 0:
        changes = [arg for change in CONFIG for arg in ("--change", change)]
        podman_ok("import", "--quiet", *changes, str(tarball), name, timeout=300)
    return name, cached
