"""What every command does the same way, whichever program runs it (`lwgpu`, `kubectl lwgpu`,
`python -m webhook`, `python -m certs`): its exit codes, its error line, a missing choice of
sub-command, and a reader of stdout that goes away.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence

# The exit codes of every command (docs/CLI.md).
EXIT_OK = 0
# The command ran and found what it reports: an object denied or placed on no node, an
# invalid policy, a certificate to renew, labels the API server would not take.
EXIT_FOUND = 1
# The command could not do what was asked: a usage error or input it cannot read, as
# argparse's own exit code for a bad flag.
EXIT_USAGE = 2
# The status a shell reports for a command that SIGPIPE ended (128 + 13), as `yes` or `cat`
# get in `... | head -1`: a plain pipeline ignores it, and a script under `set -o pipefail`
# sees what it sees for any other Unix tool there, not a success that printed half its output.
CLOSED_STDOUT_EXIT = 128 + signal.SIGPIPE


class UsageError(Exception):
    """The command cannot run as asked (a flag, a file it cannot read): `run` prints the
    message as an error line and exits `EXIT_USAGE`."""


def say_error(args: argparse.Namespace, message: object) -> None:
    """`PROG: error: MESSAGE` on stderr, the form of argparse's own errors, where PROG is the
    command as invoked (`lwgpu review`, `python -m certs generate`)."""
    print(f"{args.prog}: error: {message}", file=sys.stderr)


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse `argv` (None: the process's arguments) and run the chosen command's `func`;
    return its exit code."""
    _finish(parser)
    args = parser.parse_args(argv)
    # argparse gives `func` as Any; every command module sets it to a `run`-style function.
    func: Callable[[argparse.Namespace], int] = args.func

    def reported() -> int:
        try:
            return func(args)
        except UsageError as exc:
            say_error(args, exc)
            return EXIT_USAGE

    return until_stdout_closes(reported)


def until_stdout_closes(command: Callable[[], int]) -> int:
    """`command()`'s exit code; `CLOSED_STDOUT_EXIT`, without a traceback, if stdout was closed.

    The Python documentation's recipe (library/signal, "Note on SIGPIPE"): flush inside the
    try so a closed pipe shows here rather than at interpreter exit, then point stdout at
    devnull so the final flush at exit cannot raise again.
    """
    try:
        code = command()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CLOSED_STDOUT_EXIT


def _finish(parser: argparse.ArgumentParser) -> None:
    """Set, on `parser` and every sub-command parser below it, `prog` (the innermost default
    wins, so `args.prog` names the command that runs) and, for a group of sub-commands, a
    `func` that answers a missing choice with the choices.

    argparse would say `the following arguments are required: action` (its internal name).
    Instead the group is optional and its `func` prints the usage, what to choose and what
    each choice does, and returns `EXIT_USAGE`.
    """
    parser.set_defaults(prog=parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.required = False
            parser.set_defaults(func=_missing(parser, action))
            for sub in action.choices.values():
                _finish(sub)


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
        return EXIT_USAGE

    return say
