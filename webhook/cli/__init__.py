"""The `python -m webhook` command line: one sub-command per module.

Each module in `COMMANDS` exposes `register(subparsers)`, which adds its parser
and sets `func` to a callable taking the parsed arguments and returning the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from webhook import __version__
from webhook.cli.conventions import ask_for_choice, until_stdout_closes

COMMANDS = (
    "webhook.offline.review",
    "webhook.offline.policy_check",
    "webhook.server.cli",
    "webhook.node.labeller",
    "webhook.offline.completion",
)


def build_parser(prog: str = "python -m webhook") -> argparse.ArgumentParser:
    """The full parser with every registered sub-command."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Admission webhook for lightweight GPU nodes."
    )
    parser.add_argument("--version", action="version", version=f"lwgpu {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        importlib.import_module(module).register(subparsers)
    ask_for_choice(parser, "func")
    # `completion` walks the whole parser; a sub-command's own parser cannot reach its root.
    parser.set_defaults(root_parser=parser)
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m webhook") -> int:
    """Parse `argv` and run the chosen sub-command; return its exit code."""
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    # argparse gives `func` as Any; every `register` sets it to a `run`-style function.
    func: Callable[[argparse.Namespace], int] = args.func
    return until_stdout_closes(lambda: func(args))


def console() -> int:
    """The `lwgpu` console script."""
    return main(prog="lwgpu")


def kubectl_plugin() -> int:
    """`kubectl lwgpu ...`: kubectl runs `kubectl-lwgpu` from PATH with the remaining words."""
    return main(prog="kubectl lwgpu")
