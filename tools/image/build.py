"""Building deploy/Dockerfile with podman on the base image, and the sizes of the result.

`--isolation chroot`: the RUN steps get no cgroup of their own, which the CI machines' hybrid
cgroups refuse. `--network host`: pip in the builder reaches the package index the way this
machine does, and `--pull=never`: every image comes from here. The machine's CA bundle goes in
as the build secret the Dockerfile mounts for its pip step only, for machines whose TLS to
the index is intercepted; it never lands in a layer. The image's revision label is the
checkout's commit.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tools.image.programs import podman_ok, run_logged
from tools.paths import REPO

IMAGE = "localhost/lwgpu:image-test"
MIB = 1024 * 1024


def ca_bundle() -> Path | None:
    """The CA bundle pip on this machine trusts, if there is one."""
    candidates = [os.environ.get(name) for name in ("PIP_CERT", "SSL_CERT_FILE")]
    candidates.append("/etc/ssl/certs/ca-certificates.crt")
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


def revision() -> str:
    """The commit of the checkout (HEAD), as the image's revision label carries it."""
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def build(base: str, log: Path) -> None:
    """Build deploy/Dockerfile from the repository root on ``base``, tagged IMAGE."""
    ca = ca_bundle()
    secret = ["--secret", f"id=pip-ca,src={ca}"] if ca else []
    log.write_text("")
    command = [
        *("podman", "build", "--isolation", "chroot", "--network", "host", "--pull=never"),
        *secret,
        *("--build-arg", f"PYTHON_IMAGE={base}", "--build-arg", f"REVISION={revision()}"),
        *("--file", str(REPO / "deploy" / "Dockerfile"), "--tag", IMAGE, str(REPO)),
    ]
    run_logged(command, log, timeout=1200)


def size_mib(image: str) -> float:
    """The unpacked size of ``image`` in MiB, as `podman images` counts it."""
    return int(podman_ok("image", "inspect", "--format", "{{.Size}}", image)) / MIB
