"""Child processes that never outlive the test run: each in a session of its own (so its whole
group can be signalled), told by the kernel to stop when its parent dies (PR_SET_PDEATHSIG),
with its output in a log file that an error message can quote."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
from pathlib import Path

PR_SET_PDEATHSIG = 1
STOP_GRACE_S = 15


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # Runs in the child between fork and exec.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `argv` with stdout and stderr appended to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=env,
        )


def stop(
    process: subprocess.Popen[bytes], grace: float = STOP_GRACE_S, whole_group: bool = True
) -> None:
    """SIGTERM the process's group (or, not `whole_group`, the process alone, as a container
    runtime signals a container's first process), SIGKILL the group after `grace` seconds,
    and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            if whole_group:
                os.killpg(process.pid, signal.SIGTERM)
            else:
                os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def tail(log: Path, lines: int = 20) -> str:
    """The last lines of a log, for an error message."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
