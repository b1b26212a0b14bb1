"""The labeller: make sure the Node carries the three `aliyun.accelerator/*` labels read from
its GPU, once or every interval, the way the lightweight-GPU cloud labels its nodes.

`webhook.cli.label_node` is its command line (`lwgpu label-node`, run by a DaemonSet).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT_S = 10  # a hung API server must not hold the agent past SIGTERM for long
if TYPE_CHECKING:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException


class LabelError(Exception):
    """The labels could not be read or written; the message says why, for the node's log."""


def ensure_labels(core: client.CoreV1Api, node: str, labels: dict[str, str]) -> bool:
    """Merge-patch `labels` onto Node `node` when any of them differs; True if it patched.

    Raises LabelError on an API failure (a missing node included).
    """
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from webhook.kube.inventory import failure

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
        raise LabelError(
            f"API server answered {err.status} {err.reason} for node {node}{_said(err)}"
        ) from err
    except (HTTPError, OSError) as err:
        # The cause in a few words: urllib3's own message names a connection object by its
        # address, so no two attempts would read the same.
        host = core.api_client.configuration.host
        raise LabelError(f"API server {host} unreachable: {failure(err)}") from err


def _said(err: ApiException) -> str:
    """': ' and the apiserver's own words (its Status message), empty where it gave none: a
    refusal by the lwgpu-labeller-own-node policy names the node or field and why."""
    try:
        message = json.loads(err.body or "{}").get("message")
    except (ValueError, AttributeError):  # not JSON, or JSON that is not an object
        return ""
    return f": {message}" if isinstance(message, str) and message else ""


def run(
    core: client.CoreV1Api,
    node: str,
    labels: dict[str, str],
    interval: float | None,
    stop: threading.Event,
    log: Callable[[str], None],
) -> bool:
    """Apply the labels once (interval None) or every `interval` seconds until `stop` is set.

    Once: False on an API failure. With an interval, failures are retried at the next tick
    (the API server may be briefly away) and each cause is logged once until the API server
    answers again, not once per tick: an apiserver away for hours costs a line per cause, and
    one more when it answers again. Returns True when stopped.
    """
    failing: set[str] = set()  # the failures logged since attempts began to fail
    while True:
        try:
            changed = ensure_labels(core, node, labels)
        except LabelError as err:
            if str(err) not in failing:
                retrying = f"; retrying every {interval:g}s" if interval is not None else ""
                log(f"label-node: {err}{retrying}")
            failing.add(str(err))
            if interval is None:
                return False
        else:
            if failing:
                log("label-node: the API server answers again")
            failing.clear()
            shown = ", ".join(f"{key}={value}" for key, value in labels.items())
            log(f"label-node: {node}: {'labels set' if changed else 'labels current'}: {shown}")
        if interval is None or stop.wait(interval):
            return True
