"""What the containers mount, laid out as the kubelet lays out the Deployment's volumes, and
the AdmissionReview they are sent.

The certificates come from `python -m certs generate` for the Deployment's Service; like the
Secret volume with `fsGroup: 65532` and `defaultMode: 0440`, the files are group 65532 and
mode 0440, so the image's user reads them only the way it can in the cluster.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from tools.bench.bodies import review, seed_pod
from tools.loopback.https_client import NAMESPACE, SERVICE
from tools.paths import REPO
from webhook import DEFAULT_POLICIES
from webhook.admission import parse_request
from webhook.admission import review as decide_review
from webhook.files import load_policies

# The uid and gid of the image's USER.
IMAGE_USER = 65532
# Not YAML at all: the loader refuses the whole directory, not only this file.
BROKEN_POLICY = "apiVersion: lwgpu.io/v1alpha1\nkind: LightweightGPUPolicy\nspec: {profiles: [\n"


def certificates(workdir: Path) -> tuple[Path, Path]:
    """(the directory to mount as /etc/lwgpu/tls, the CA a client trusts)."""
    made = workdir / "generated"
    command = [sys.executable, "-m", "certs", "generate", "--out", str(made)]
    command += ["--service", SERVICE, "--namespace", NAMESPACE]
    subprocess.run(command, cwd=REPO, check=True, capture_output=True, timeout=60)
    tls = workdir / "tls"
    tls.mkdir(mode=0o755)
    for name in ("ca.crt", "tls.crt", "tls.key"):
        shutil.copy(made / name, tls / name)
        os.chown(tls / name, 0, IMAGE_USER)
        (tls / name).chmod(0o440)
    return tls, made / "ca.crt"


def policy_dir(workdir: Path, name: str, *, broken: bool) -> Path:
    """A policy directory holding the shipped policy, and a broken file beside it if asked."""
    directory = workdir / name
    directory.mkdir(mode=0o755)
    shutil.copy(DEFAULT_POLICIES, directory / "default.yaml")
    if broken:
        (directory / "broken.yaml").write_text(BROKEN_POLICY)
    for path in directory.iterdir():
        path.chmod(0o644)
    return directory


def seed_review() -> tuple[str, dict[str, Any]]:
    """(the seed pod's AdmissionReview as the apiserver sends it, the answer the code in this
    checkout gives it with the shipped policy)."""
    body = review(seed_pod())
    request = parse_request(body)
    expected = decide_review(request, load_policies(DEFAULT_POLICIES), "mutate").response
    return orjson.dumps(body).decode(), orjson.loads(orjson.dumps(expected))
