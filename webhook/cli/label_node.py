"""`lwgpu label-node`: the node agent's command line (a DaemonSet runs it on every GPU node,
with NODE_NAME from the downward API).

NVML is read before any contact with the API server, so a node without a driver exits 2 with
the cause and its labels stay untouched. Once: exit 0, or 1 when the API server refuses or
cannot be reached; with `--interval` it runs until SIGTERM and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

from webhook.node import labeller
from webhook.node.nvml import NvmlUnavailable, gpu_labels, read_gpu

from .conventions import EXIT_FOUND, EXIT_OK, UsageError


def _interval(text: str) -> float:
    seconds = float(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return seconds


def configure(parser: argparse.ArgumentParser) -> None:
    """The `label-node` flags."""
    parser.description = (
        "Label this node's GPU (NVML count, memory, name) as the lightweight-GPU cloud does."
    )
    parser.add_argument(
        "--node",
        default=os.environ.get("NODE_NAME"),
        help="Node to label (default: $NODE_NAME, from the downward API)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="label once and exit (default)")
    mode.add_argument(
        "--interval",
        type=_interval,
        metavar="SECONDS",
        help="re-check the labels every SECONDS until SIGTERM",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the labels it would set; contact no API server",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read the GPU, then label the node once or every `--interval` seconds."""

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        labels = gpu_labels(read_gpu())
    except NvmlUnavailable as exc:
        raise UsageError(exc) from None
    if args.dry_run:
        for key, value in labels.items():
            print(f"{key}={value}")
        return EXIT_OK
    if not args.node:
        raise UsageError("no node name: set NODE_NAME (downward API spec.nodeName) or --node")
    # Imported here: --dry-run and a node without NVML never need the client, which takes
    # about a second to import.
    from webhook.kube.client import KubeConfigError, core_api

    try:
        core = core_api()
    except KubeConfigError as exc:
        raise UsageError(exc) from None
    # urllib3 warns at each of its retries of a failed connection; the labeller says why it
    # failed itself, once per cause (webhook.node.labeller.run)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():  # only it may take signals
        labelled = labeller.run(core, args.node, labels, args.interval, stop, log)
    else:
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            labelled = labeller.run(core, args.node, labels, args.interval, stop, log)
        finally:
            signal.signal(signal.SIGTERM, previous)
    return EXIT_OK if labelled else EXIT_FOUND
