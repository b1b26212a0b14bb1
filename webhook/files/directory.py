"""Which files a path names: the one directory rule of `serve --policies`, `policy check`
and `review`, and how an unreadable file is reported.

A directory is read recursively, entries in name order at each level (a sub-directory's
files where its name sorts), and any entry whose name starts with `.` is skipped. A mounted
ConfigMap volume holds each file twice, as `name -> ..data/name` and inside the hidden
`..data` / `..2024_01_01_00_00_00.123` directories kubelet swaps (pkg/volume/util/
atomic_writer.go, `Write`): skipping dot-names reads each file once, and also skips `.git`
and editors' hidden files. Symbolic links are followed (a ConfigMap key with a path such as
`team/a.yaml` is a linked directory), each real directory once, so a link loop ends.
"""

from __future__ import annotations

import os
from pathlib import Path

# Policies are YAML (the spec's `*.yaml|*.yml`); `review` also reads the JSON that
# `kubectl get -o json` and AdmissionReview captures are usually saved as.
POLICY_SUFFIXES = (".yaml", ".yml")
MANIFEST_SUFFIXES = (*POLICY_SUFFIXES, ".json")


def files_under(path: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The files of `path` with one of `suffixes`, by the rule above; a path that is not a
    directory is returned as given (even with another suffix: naming a file is asking for
    it). Raises `OSError` when a directory cannot be listed."""
    if not path.is_dir():
        return [path]
    found: list[Path] = []
    _walk(path, suffixes, found, set())
    return found


def _walk(directory: Path, suffixes: tuple[str, ...], found: list[Path], seen: set[str]) -> None:
    real = os.path.realpath(directory)
    if real in seen:
        return
    seen.add(real)
    for entry in sorted(directory.iterdir(), key=lambda p: p.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            _walk(entry, suffixes, found, seen)
        elif entry.suffix in suffixes and entry.is_file():
            found.append(entry)


def unreadable(path: object, err: OSError | UnicodeDecodeError) -> str:
    """`PATH: cannot read: no such file or directory`: the reason without Python's wording
    (`[Errno 2] ...: 'PATH'` repeats the path and means nothing to an admin)."""
    if isinstance(err, UnicodeDecodeError):
        reason = f"not UTF-8 text (byte {err.start})"
    else:
        reason = (err.strerror or type(err).__name__).lower()
    return f"{path}: cannot read: {reason}"
