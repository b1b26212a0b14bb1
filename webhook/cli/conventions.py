"""What every command line (`python -m webhook`, `python -m certs`) does the same way: end
quietly when the reader of stdout goes away, and say which sub-command to choose.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable

# The status a shell reports for a command that SIGPIPE ended (128 + 13), as `yes` or `cat`
# get in `... | head -1`: a plain pipeline ignores it, and a script under `set -o pipefail`
# sees what it sees for any other Unix tool there, not a success that printed half its output.
CLOSED_STDOUT_EXIT = 128 + signal.SIGPIPE


def until_stdout_closes(run: Callable[[], int]) -> int:
    """`run()`'s exit code; `CLOSED_STDOUT_EXIT`, without a traceback, if stdout was closed.

    The Python documentation's recipe (library/signal, "Note on SIGPIPE"): flush inside the
    try so a closed pipe shows here rather than at interpreter exit, then point stdout at
    devnull so the final flush at exit cannot raise again.
    """
    try:
        code = run()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CLOSED_STDOUT_EXIT


def ask_for_choice(parser: argparse.ArgumentParser, key: str) -> None:
    """Make every sub-command group under `parser` answer a missing choice with its choices.

    argparse would say `the following arguments are required: action` (its internal name).
    Instead the group is optional and its parser's default `key` (the attribute the caller
    runs) prints the usage, what to choose and what each choice does, and returns 2.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.required = False
            parser.set_defaults(**{key: _missing(parser, action)})
            for sub in action.choices.values():
                ask_for_choice(sub, key)


def _missing(
    parser: argparse.ArgumentParser, group: argparse._SubParsersAction[argparse.ArgumentParser]
) -> Callable[[argparse.Namespace], int]:
    def say(_args: argparse.Namespace) -> int:
        what = str(group.dest)
        article = "an" if what[:1] in "aeiou" else "a"
        width = max(len(choice.dest) for choice in group._choices_actions)
        listed = "".join(
            f"  {choice.dest:<{width}}  {choice.help or ''}".rstrip() + "\n"
            for choice in group._choices_actions
        )
        sys.stderr.write(
            f"{parser.format_usage()}{parser.prog}: error: choose {article} {what}:\n{listed}"
        )
        return 2

    return say
