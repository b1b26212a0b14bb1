"""The command line, pip's way: `lwgpu`, `kubectl lwgpu` and `python -m webhook` dispatch here.

One module per command (`review`, `policy`, `serve`, `label_node`, `certs`, `completion`)
parses its arguments in `configure(parser)` and turns them into calls on the packages that do
the work (`webhook.offline`, `webhook.server`, `webhook.node`, `certs`), and their results
into output and an exit code. `options` defines the options several commands share;
`conventions` what every command does alike (exit codes, the `PROG: error:` line, a missing
choice, a closed stdout). `python -m certs` runs the `certs` command on its own.

Only the command that runs is imported and configured, as pip imports only the command it
runs: `review` does not load the server, nor `serve` the offline review, nor either
`cryptography`. `completion` alone builds the parser with every command.

The top layer: imports any package below it, and `certs`; only `certs.__main__` imports it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence
from functools import partial

from webhook import __version__

from . import conventions

# Every command and its one-line help, in the order `--help` lists them; the module that
# configures it is `webhook.cli.<name with _ for ->`.
COMMANDS = {
    "review": "dry-run the decision on manifests or AdmissionReviews",
    "policy": "work with policy files",
    "serve": "run the HTTPS admission server (gunicorn)",
    "label-node": "label this node's GPU (NVML)",
    "certs": "generate, check, install or rotate the webhook's certificates",
    "completion": "print a shell completion script",
}
PROG = "python -m webhook"


def build_parser(
    prog: str = PROG, configured: Collection[str] = COMMANDS.keys()
) -> argparse.ArgumentParser:
    """The parser of every command, with the arguments of those in `configured` (the others
    have only their name and help, enough to choose one)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Admission webhook for lightweight GPU nodes."
    )
    parser.add_argument("--version", action="version", version=f"lwgpu {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, summary in COMMANDS.items():
        command = commands.add_parser(name, help=summary)
        if name in configured:
            importlib.import_module(f"{__name__}.{name.replace('-', '_')}").configure(command)
    # `completion` walks the whole parser; a command's own parser cannot reach its root.
    parser.set_defaults(whole_parser=partial(build_parser, prog))
    return parser


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Parse `argv` and run the chosen command; return its exit code."""
    words = sys.argv[1:] if argv is None else argv
    # The top level has no option that takes a value: the first word that is no option is
    # the command (argparse refuses it later if it is none).
    chosen = [word for word in words if not word.startswith("-")][:1]
    return conventions.run(build_parser(prog, configured=chosen), words)


def console() -> int:
    """The `lwgpu` console script."""
    return main(prog="lwgpu")


def kubectl_plugin() -> int:
    """`kubectl lwgpu ...`: kubectl runs `kubectl-lwgpu` from PATH with the remaining words."""
    return main(prog="kubectl lwgpu")
