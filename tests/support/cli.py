"""Running `python -m webhook ...` in-process, as the review and policy CLI tests do: the exit
code, stdout and stderr of one invocation, with stdin given as text.
"""

from __future__ import annotations

import contextlib
import io
import sys

from webhook import cli


def run_cli(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    """Run `python -m webhook *argv` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(argv))
            except SystemExit as stop:  # argparse reports usage errors this way
                code = stop.code if isinstance(stop.code, int) else 2
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()
