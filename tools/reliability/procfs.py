"""The gunicorn workers of a running server, read from /proc (Linux; psutil is not a dependency)."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def parent_of(pid: int) -> int | None:
    """The parent pid of `pid`, or None when the process is gone."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) is parenthesised and may itself hold spaces and parentheses.
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def children(pid: int) -> set[int]:
    """Live child processes of `pid` (for a gunicorn master: its workers)."""
    found = set()
    for entry in os.listdir(PROC):
        if entry.isdigit() and parent_of(int(entry)) == pid and alive(int(entry)):
            found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie waiting to be reaped."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"
