"""Read-only LISTs of API resources, page by page, as the JSON the apiserver sends: what
`review --cluster` reads.

Each LIST asks for at most `limit` objects and follows the `continue` token of each page, as
kubectl's `--chunk-size` does (k8s.io/cli-runtime, resource/helper.go `List`; the apiserver
serves pages from one consistent snapshot: k8s.io/apiserver, storage/cacher and
storage/etcd3/store.go `GetList`). Only GET is ever sent. The objects are the JSON of the
response, not the client's models, so that nothing the apiserver stored is renamed, dropped
or defaulted on the way; each item gets the `apiVersion` and `kind` a list response leaves
out of its items.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3 import exceptions as urllib3_exceptions

from .inventory import failure, refusal

# (connect, read) seconds: a page of 500 pods is a few MB, and one hung request must end.
REQUEST_TIMEOUT_S = (10, 60)
# kubectl's default --chunk-size.
PAGE = 500


@dataclass(frozen=True)
class Resource:
    """A listable resource: its API version, kind and plural name, and whether it lives in
    namespaces."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None) -> str:
        """The LIST path: of one namespace, or of all (`namespace` None, or cluster-scoped)."""
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        within = f"/namespaces/{namespace}" if self.namespaced and namespace else ""
        return f"{root}{within}/{self.plural}"

    def described(self, namespace: str | None) -> str:
        """`deployments.apps in namespace "x"`, as kubectl names a resource."""
        group = self.api_version.rpartition("/")[0]
        name = f"{self.plural}.{group}" if group else self.plural
        if not self.namespaced:
            return name
        return f'{name} in namespace "{namespace}"' if namespace else f"{name} in all namespaces"


class ListError(Exception):
    """A LIST that failed: the message says which and why in one line; `status` is the
    apiserver's HTTP status, None when it could not be reached."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.status = status


def list_objects(
    api: client.ApiClient, resource: Resource, namespace: str | None, limit: int = PAGE
) -> Iterator[dict[str, Any]]:
    """Every object of `resource` in `namespace` (None: all), page by page; raises
    `ListError`."""
    token = ""
    while True:
        query: list[tuple[str, object]] = [("limit", limit)]
        if token:
            query.append(("continue", token))
        page = _get(api, resource.path(namespace), query, resource.described(namespace))
        for item in page.get("items") or []:
            yield {"apiVersion": resource.api_version, "kind": resource.kind, **item}
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return


def _get(
    api: client.ApiClient, path: str, query: list[tuple[str, object]], what: str
) -> dict[str, Any]:
    request = api.param_serialize(
        "GET",
        path,
        query_params=query,
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    host = api.configuration.host
    try:
        response = api.call_api(*request, _request_timeout=REQUEST_TIMEOUT_S)
        data: bytes = response.read()  # type: ignore[no-untyped-call]  # unannotated
    except ApiException as err:  # the client's wrapping of a failed TLS handshake
        raise ListError(f"cannot reach the API server {host}: {failure(err)}", None) from err
    except (urllib3_exceptions.HTTPError, OSError) as err:
        raise ListError(f"cannot reach the API server {host}: {failure(err)}", None) from err
    if not 200 <= response.status <= 299:
        said = f"the API server answered {response.status} {response.reason}"
        refused = ApiException(response.status, response.reason, body=data.decode(errors="replace"))
        raise ListError(f"cannot list {what}: {said}: {refusal(refused)}", response.status)
    page: dict[str, Any] = json.loads(data)
    return page
