"""requirements.lock, what the image installs (`--require-hashes --only-binary=:all:`): it pins
requirements.txt's versions, holds every dependency of them and nothing else, each package at
one version with a sha256 per wheel, and the venv the tests run in has those same versions
(`make` installs it under the lock).

The dependencies are read from the venv's installed metadata (each distribution's
Requires-Dist, markers evaluated for this interpreter, no extras), so the check needs no
network; `python -m tools.lock` (tools/lock.py) regenerates the lock.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.paths import REPO
from tools.lock import HEADER, LockError, normalised, pins, render

ENTRY = re.compile(r"^(?P<name>[a-z0-9-]+)==(?P<version>\S+)$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


def locked() -> dict[str, tuple[str, list[str]]]:
    """requirements.lock as name -> (version, hash options), its continuation lines joined."""
    text = re.sub(r"\s*\\\n\s*", " ", (REPO / "requirements.lock").read_text())
    entries = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        requirement, *hashes = line.split()
        parts = ENTRY.match(requirement)
        assert parts is not None, f"not an exact pin of a normalised name: {line}"
        entries[parts["name"]] = (parts["version"], hashes)
    return entries


def pinned() -> dict[str, str]:
    """requirements.txt as name -> version."""
    found = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            found[normalised(name)] = version
    return found


def closure(names) -> set[str]:
    """`names` and every distribution they need, as installed here, without extras."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in importlib.metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(normalised(requirement.name))
    return seen


def test_the_lock_pins_the_versions_of_requirements_txt():
    entries = locked()
    assert {name: entries[name][0] for name in pinned()} == pinned()


def test_every_locked_package_has_an_exact_version_and_wheel_hashes():
    for name, (_, hashes) in locked().items():
        assert hashes and all(HASH.match(h) for h in hashes), name
    assert (REPO / "requirements.lock").read_text().startswith(HEADER)


def test_the_lock_holds_every_dependency_and_nothing_else():
    assert set(locked()) == closure(pinned())


def test_the_venv_runs_the_locked_versions():
    installed = {name: importlib.metadata.version(name) for name in locked()}
    assert installed == {name: version for name, (version, _) in locked().items()}


def wheel(directory: Path, name: str, body: bytes) -> Path:
    path = directory / name
    path.write_bytes(body)
    return path


def test_the_tool_keeps_one_hash_per_distinct_wheel_and_renders_what_pip_reads(tmp_path):
    wheels = [
        wheel(tmp_path, "PyYAML-6.0.4-cp311-cp311-manylinux_2_17_x86_64.whl", b"x86"),
        wheel(tmp_path, "PyYAML-6.0.4-cp311-cp311-manylinux_2_17_aarch64.whl", b"arm"),
        wheel(tmp_path, "typing_extensions-4.16.0-py3-none-any.whl", b"any"),
    ]
    found = pins(wheels)
    assert found == {
        "pyyaml": ("6.0.4", {hashlib.sha256(b).hexdigest() for b in (b"x86", b"arm")}),
        "typing-extensions": ("4.16.0", {hashlib.sha256(b"any").hexdigest()}),
    }
    text = render(found)
    assert text.startswith(HEADER)
    body = text[len(HEADER) :].splitlines()
    assert body[0] == "pyyaml==6.0.4 \\"
    assert body[1].endswith(" \\") and not body[2].endswith("\\")
    assert body[3:] == [
        "typing-extensions==4.16.0 \\",
        f"    --hash=sha256:{hashlib.sha256(b'any').hexdigest()}",
    ]


def test_the_tool_refuses_architectures_that_disagree(tmp_path):
    wheels = [
        wheel(tmp_path, "orjson-3.13.0-cp311-cp311-manylinux_2_17_x86_64.whl", b"a"),
        wheel(tmp_path, "orjson-3.12.9-cp311-cp311-manylinux_2_17_aarch64.whl", b"b"),
    ]
    with pytest.raises(LockError) as refused:
        pins(wheels)
    assert str(refused.value) == "orjson: 3.13.0 on one architecture, 3.12.9 on another"
