"""The Nodes' metadata as `NodeInventory` reads it: only their metadata, and a list in pages,
so that neither a Node model nor a whole list of 15,000 Nodes is ever built in memory.

Errors are the kubernetes client's own (`ApiException` for an answer that is not 2xx, as
urllib3's for the connection), raised to the inventory, which retries and reports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import orjson
import urllib3
from kubernetes import client

# Only the Nodes' metadata, as client-go's metadata client asks for it (k8s.io/client-go/
# metadata/metadata.go, `List` and `Watch`): kube-apiserver converts each listed Node, and
# each watched one, to a PartialObjectMetadata (staging/src/k8s.io/apiserver/pkg/endpoints/
# handlers/response.go, `doTransformObject`: `asPartialObjectMetadataList` for a list, and
# `asPartialObjectMetadata` through `watchEmbeddedEncoder` for each watch event; watch.go,
# `serveWatchHandler`). A Status, such as a watch's 410, is sent as it is. The plain JSON
# after it is what a server that cannot convert answers: its Nodes read the same.
LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
# Nodes per page, as client-go's pager (k8s.io/client-go/tools/pager, `defaultPageSize`): the
# pages of one list are one snapshot, at the resourceVersion each carries (ListOptions'
# `limit` and `continue`); an expired continue token is a 410, which lists afresh.
PAGE = 500


def list_labels(
    core: client.CoreV1Api, selector: str
) -> tuple[dict[str, dict[str, str]], str | None]:
    """Each Node's labels by name, of the Nodes `selector` selects, and the resourceVersion
    of that list (None only if the apiserver sent none: a watch then starts from now)."""
    listed: dict[str, dict[str, str]] = {}
    page: dict[str, Any] = {}
    while not page or page["metadata"].get("continue"):
        answer = cast(
            urllib3.BaseHTTPResponse,
            core.list_node(
                label_selector=selector,
                limit=PAGE,
                _continue=page["metadata"]["continue"] if page else None,
                _request_timeout=30,
                _preload_content=False,
                _headers={"Accept": LIST_ACCEPT},
            ),
        )
        try:
            page = orjson.loads(answer.data)
        finally:
            answer.release_conn()
        for item in page.get("items") or ():  # a PartialObjectMetadataList of none: null
            listed[item["metadata"]["name"]] = item["metadata"].get("labels") or {}
    version = page["metadata"].get("resourceVersion")
    return listed, str(version) if version else None


def watcher(core: client.CoreV1Api) -> Callable[..., urllib3.BaseHTTPResponse]:
    """The function for `kubernetes.watch.Watch.stream` that watches the Nodes' metadata.

    Watch builds, for each event, the model that its function's return annotation or
    docstring names (`_find_return_type`); this one names none of the client's models, so each
    event stays the dict parsed from its line, and its "ERROR" events (a 410) still raise."""

    def metadata(**options: Any) -> urllib3.BaseHTTPResponse:
        return cast(
            urllib3.BaseHTTPResponse,
            core.list_node(**options, _headers={"Accept": WATCH_ACCEPT}),
        )

    return metadata
