"""The checks of the built image, each a PASS or FAIL line with what was seen.

Two servers run at once: one with the shipped policy (probes, a review, its identity, then
SIGTERM) and one whose policy directory holds a broken file (/readyz). The other commands of
the image run once each, with the same hardened flags, and one walks the image's file system
for an installer the base brought (pip, setuptools, wheel).
"""

from __future__ import annotations

import base64
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from tools.image.build import revision, size_mib
from tools.image.container import Containers, started
from tools.image.fixtures import IMAGE_USER, certificates, policy_dir, seed_review
from tools.image.probe import Answer, ask
from tools.image.programs import podman, podman_ok
from webhook import __version__

MAX_MIB = 250
TLS, POLICIES = "/etc/lwgpu/tls", "/etc/lwgpu/policies"
STOP_TIMEOUT = 10
# `python -v` names the file of each module it executes; a .py file was compiled at start.
COMPILED = re.compile(r"^# code object from (/\S+\.py)$", re.MULTILINE)
IMPORT_ALL = (
    "import importlib, pkgutil, sys, certs, webhook\n"
    "for p in (certs, webhook):\n"
    "    for m in pkgutil.walk_packages(p.__path__, p.__name__ + '.'):\n"
    "        if m.name.rpartition('.')[2] != '__main__':\n"
    "            importlib.import_module(m.name)\n"
    "print(len(sys.modules))\n"
)
# Any trace of an installer: its package or metadata, its wheel (ensurepip's, Debian's
# python-wheels), its command, ensurepip itself. Printed one path a line.
INSTALLERS = (
    "import os, re\n"
    "named = re.compile(r'(pip|setuptools|wheel)-.*\\.(dist-info|egg-info|whl)|"
    "(pip|pip3|pip3\\.\\d+|wheel)|distutils-precedence\\.pth|python-wheels')\n"
    "packages = {'pip', 'setuptools', 'wheel', 'pkg_resources', '_distutils_hack', 'ensurepip'}\n"
    "for root, dirs, files in os.walk('/'):\n"
    "    if root in ('/proc', '/sys', '/dev'):\n"
    "        dirs[:] = []\n"
    "        continue\n"
    "    for name in dirs + files:\n"
    "        path = os.path.join(root, name)\n"
    "        package = name in packages and os.path.isfile(os.path.join(path, '__init__.py'))\n"
    "        if package or named.fullmatch(name):\n"
    "            print(path)\n"
)


class Result(NamedTuple):
    """One line of the report."""

    name: str
    ok: bool
    detail: str


def size(image: str, base: str) -> Result:
    """The image's unpacked size against the target."""
    total, below = size_mib(image), size_mib(base)
    detail = f"{total:.1f} MiB: base {below:.1f} MiB + lwgpu layers {total - below:.1f} MiB"
    return Result(f"image size <= {MAX_MIB} MiB", total <= MAX_MIB, detail)


def labels(image: str, base: str) -> Result:
    """The OCI labels: this release, this commit, the license, the source, the base."""
    found = orjson.loads(podman_ok("image", "inspect", "--format", "{{json .Labels}}", image))
    prefix = "org.opencontainers.image."
    wanted = {
        "version": __version__,
        "revision": revision(),
        "licenses": "Apache-2.0",
        "source": "https://github.com/lwgpu/lwgpu",
        "base.name": base,
    }
    got = {key: found.get(prefix + key) for key in wanted}
    detail = ", ".join(f"{key}={value}" for key, value in got.items())
    return Result("OCI labels", got == wanted, detail)


def _log_tail(name: str) -> str:
    logged = podman("logs", name)
    return " | ".join((logged.stdout + logged.stderr).strip().splitlines()[-5:])


def _answered(answer: Answer) -> str:
    return f"{answer['status']} {answer['body']}"


def identity(containers: Containers, name: str, pid: int) -> Result:
    """The server's process as this machine sees it, and a write to its root filesystem."""
    what = "runs as 65532 with a read-only root and no capabilities"
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:4]
    except OSError as error:
        return Result(what, False, f"the server is not running: {error}")
    fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    user = podman_ok("image", "inspect", "--format", "{{.Config.User}}", containers.image)
    wrote = podman("exec", name, "python", "-c", "open('/app/written', 'w')")
    refused = wrote.returncode != 0 and "Read-only file system" in wrote.stderr
    write = (wrote.stderr.strip() or "allowed").splitlines()[-1]
    ids = {fields["Uid"], fields["Gid"]}
    capabilities = {fields[c] for c in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
    ok = (
        user == f"{IMAGE_USER}:{IMAGE_USER}"
        and ids == {"\t".join([str(IMAGE_USER)] * 4)}
        and capabilities == {"0" * 16}
        and fields["NoNewPrivs"] == "1"
        and command == [b"python", b"-m", b"webhook", b"serve"]
        and refused
    )
    detail = (
        f"USER {user}; PID 1 `{b' '.join(command).decode()} ...` uid/gid "
        f"{fields['Uid'].split()[0]}/{fields['Gid'].split()[0]}, capabilities "
        f"{'none' if capabilities == {'0' * 16} else sorted(capabilities)}, NoNewPrivs "
        f"{fields['NoNewPrivs']}; writing /app: {write}"
    )
    return Result(what, ok, detail)


def _patch_ops(answer: dict[str, Any]) -> str:
    patch = orjson.loads(base64.b64decode(answer["response"].get("patch", "")) or b"[]")
    return ", ".join(f"{op['op']} {op['path']}" for op in patch)


def served(containers: Containers, workdir: Path) -> Iterator[Result]:
    """The probes and a review over HTTPS, the broken policy, identity and SIGTERM."""
    tls, ca = certificates(workdir)
    good = policy_dir(workdir, "policies", broken=False)
    bad = policy_dir(workdir, "broken", broken=True)
    body, expected = seed_review()
    server, pid = containers.start({tls: TLS, good: POLICIES})
    broken, broken_pid = containers.start({tls: TLS, bad: POLICIES})
    requests = [
        {"method": "GET", "path": "/healthz"},
        {"method": "GET", "path": "/readyz"},
        {"method": "POST", "path": "/mutate", "body": body},
    ]
    names = ["/healthz over HTTPS", "/readyz with the shipped policy", "/mutate of the seed pod"]
    try:
        healthz, readyz, mutate = ask(pid, ca, requests, workdir / "requests.json")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        logs = _log_tail(server)
        yield from (Result(name, False, f"{error}; server log: {logs}") for name in names)
    else:
        ok = healthz == {"status": 200, "body": '{"status":"ok"}'}
        yield Result(names[0], ok, _answered(healthz))
        ready = readyz["status"] == 200 and orjson.loads(readyz["body"])["status"] == "ready"
        yield Result(names[1], ready, _answered(readyz))
        answer = orjson.loads(mutate["body"]) if mutate["status"] == 200 else None
        detail = (
            f"{mutate['status']}, JSON Patch: {_patch_ops(answer)}" if answer else _answered(mutate)
        )
        equal = answer == expected
        detail += "; equal to this checkout's answer" if equal else f"; expected {expected}"
        yield Result(names[2], equal, detail)
    yield identity(containers, server, pid)
    yield _broken_policy(broken, broken_pid, ca, workdir)
    yield _sigterm(server)


def _broken_policy(name: str, pid: int, ca: Path, workdir: Path) -> Result:
    what = "/readyz fails on a broken policy"
    try:
        (readyz,) = ask(pid, ca, [{"method": "GET", "path": "/readyz"}], workdir / "broken.json")
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return Result(what, False, f"{error}; server log: {_log_tail(name)}")
    ok = readyz["status"] == 503 and "broken.yaml" in readyz["body"]
    return Result(what, ok, _answered(readyz))


def _sigterm(name: str) -> Result:
    """`podman stop` sends SIGTERM (the image sets no STOPSIGNAL), SIGKILL after the timeout."""
    began = time.monotonic()
    stopped = podman("stop", "--time", str(STOP_TIMEOUT), name, timeout=STOP_TIMEOUT + 30)
    took = time.monotonic() - began
    code = podman_ok("inspect", "--format", "{{.State.ExitCode}}", name)
    ok = stopped.returncode == 0 and code == "0" and took < STOP_TIMEOUT
    return Result("SIGTERM exits 0", ok, f"exit code {code} {took:.1f} s after podman stop")


def commands(containers: Containers) -> Iterator[Result]:
    """The node labeller, the certificate tool and the imports, each run once."""
    labelled = containers.once("label-node", "--dry-run", "--node", "image-test")
    said = (labelled.stdout + labelled.stderr).strip()
    clean = labelled.returncode != 0 and "Traceback" not in said and "NVML" in said
    yield Result(
        "label-node --dry-run fails cleanly without a GPU",
        clean,
        f"exit {labelled.returncode}: {said}",
    )
    helped = containers.once("-m", "certs", "--help", entrypoint="python")
    lists = all(command in helped.stdout for command in ("generate", "check", "install"))
    first = (helped.stdout.strip() or helped.stderr.strip()[-500:]).splitlines()[0]
    yield Result(
        "python -m certs --help",
        helped.returncode == 0 and lists,
        f"exit {helped.returncode}: {first}",
    )
    imported = containers.once("-v", "-c", IMPORT_ALL, entrypoint="python")
    compiled = COMPILED.findall(imported.stderr)
    ok = imported.returncode == 0 and compiled == []
    detail = (
        f"{imported.stdout.strip()} modules, none compiled at start"
        if ok
        else f"exit {imported.returncode}; compiled from source: {compiled[:5]} "
        f"{imported.stderr.strip()[-500:] if imported.returncode else ''}"
    )
    yield Result("every module of webhook and certs imports from shipped bytecode", ok, detail)
    walked = containers.once("-c", INSTALLERS, entrypoint="python")
    left = walked.stdout.split()
    piped = containers.once("-m", "pip", "--version", entrypoint="python")
    ok = walked.returncode == 0 and left == [] and "No module named pip" in piped.stderr
    detail = (
        "no pip, setuptools or wheel on the file system; python -m pip: no module"
        if ok
        else f"exit {walked.returncode}: {left[:8]} {walked.stderr.strip()[-300:]}; "
        f"python -m pip: {(piped.stdout + piped.stderr).strip()[-200:]}"
    )
    yield Result("no installer left in the image", ok, detail)


def check_all(image: str, base: str, workdir: Path) -> Iterator[Result]:
    """Every check, in order; the containers are removed when this ends, however it ends."""
    yield size(image, base)
    yield labels(image, base)
    with started(image) as containers:
        yield from served(containers, workdir)
        yield from commands(containers)
