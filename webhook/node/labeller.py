"""`python -m webhook label-node`: label this node's GPU the way the lightweight-GPU cloud does.

Runs on every GPU node (a DaemonSet with NODE_NAME from the downward API). It reads the GPU
through NVML once, then makes sure the Node carries the three `aliyun.accelerator/*` labels,
once or every `--interval` seconds. NVML is read before any contact with the API server, so a
node without a driver exits 2 with the cause and its labels stay untouched.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from webhook.node.nvml import NvmlUnavailable, gpu_labels, read_gpu

MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT_S = 10  # a hung API server must not hold the agent past SIGTERM for long
EXIT_OK, EXIT_API, EXIT_USAGE = 0, 1, 2
if TYPE_CHECKING:
    from kubernetes import client

DESCRIPTION = "Label this node's GPU (NVML count, memory, name) as the lightweight-GPU cloud does."


class LabelError(Exception):
    """The labels could not be read or written; the message says why, for the node's log."""


def ensure_labels(core: client.CoreV1Api, node: str, labels: dict[str, str]) -> bool:
    """Merge-patch `labels` onto Node `node` when any of them differs; True if it patched.

    Raises LabelError on an API failure (a missing node included).
    """
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        metadata = core.read_node(node, _request_timeout=REQUEST_TIMEOUT_S).metadata
        current = (metadata.labels if metadata else None) or {}
        if all(current.get(key) == value for key, value in labels.items()):
            return False
        # a merge patch touches only these keys and needs no resourceVersion: no conflicts
        core.patch_node(
            node,
            {"metadata": {"labels": labels}},
            _content_type=MERGE_PATCH,
            _request_timeout=REQUEST_TIMEOUT_S,
        )
        return True
    except ApiException as err:
        if err.status == 404:
            raise LabelError(f'node "{node}" not found (is NODE_NAME the node\'s name?)') from err
        raise LabelError(f"API server answered {err.status} {err.reason} for node {node}") from err
    except (HTTPError, OSError) as err:
        raise LabelError(f"API server unreachable: {err}") from err


def run(
    core: client.CoreV1Api,
    node: str,
    labels: dict[str, str],
    interval: float | None,
    stop: threading.Event,
    log: Callable[[str], None],
) -> int:
    """Apply the labels once (interval None) or every `interval` seconds until `stop` is set.

    Once: exit code 0, or 1 on an API failure. With an interval, failures are logged and
    retried at the next tick (the API server may be briefly away); returns 0 when stopped.
    """
    while True:
        try:
            changed = ensure_labels(core, node, labels)
            shown = ", ".join(f"{key}={value}" for key, value in labels.items())
            log(f"label-node: {node}: {'labels set' if changed else 'labels current'}: {shown}")
        except LabelError as err:
            log(f"label-node: {err}")
            if interval is None:
                return EXIT_API
        if interval is None or stop.wait(interval):
            return EXIT_OK


def _interval(text: str) -> float:
    seconds = float(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError("must be a positive number of seconds")
    return seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `label-node` flags."""
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


def execute(args: argparse.Namespace, build: Callable[[], client.CoreV1Api] | None = None) -> int:
    """Run `label-node` for parsed arguments; returns the exit code."""

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        labels = gpu_labels(read_gpu())
    except NvmlUnavailable as exc:
        log(f"label-node: {exc}")
        return EXIT_USAGE
    if args.dry_run:
        for key, value in labels.items():
            print(f"{key}={value}")
        return EXIT_OK
    if not args.node:
        log("label-node: no node name: set NODE_NAME (downward API spec.nodeName) or --node")
        return EXIT_USAGE
    # Imported here: `python -m webhook serve` registers this command too, and the client
    # would add ~50 MiB to every server process that never talks to the API.
    from webhook.kube.client import KubeConfigError, core_api

    try:
        core = (build or core_api)()
    except KubeConfigError as exc:
        log(f"label-node: {exc}")
        return EXIT_USAGE
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():  # only it may take signals
        return run(core, args.node, labels, args.interval, stop, log)
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        return run(core, args.node, labels, args.interval, stop, log)
    finally:
        signal.signal(signal.SIGTERM, previous)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `label-node` sub-command to the `python -m webhook` parser."""
    parser = subparsers.add_parser(
        "label-node", help="label this node's GPU (NVML)", description=DESCRIPTION
    )
    add_arguments(parser)
    parser.set_defaults(func=execute)


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point: `label-node` flags only."""
    parser = argparse.ArgumentParser(prog="label-node", description=DESCRIPTION)
    add_arguments(parser)
    return execute(parser.parse_args(argv))
