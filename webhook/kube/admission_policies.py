"""Admission policy objects written with server-side apply: how `policy sync` puts the
compiled final-state check (`webhook.compile`) into the apiserver.

Each object is sent whole as an apply patch (`application/apply-patch+yaml`) under the field
manager `lwgpu`, with `force`: the fields become lwgpu's, whoever set them before (`kubectl
apply`, Helm), so every replica that applies the same objects agrees and none conflicts. On an
object that exists an apply patch needs only the `patch` verb; creating one would also need
`create`, which the shipped RBAC withholds (the install creates the objects), so a missing
object is answered 403.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3 import exceptions as urllib3_exceptions

from .inventory import failure

FIELD_MANAGER = "lwgpu"
APPLY_PATCH = "application/apply-patch+yaml"
REQUEST_TIMEOUT_S = 10  # one hung request must not hold up the retries


class ApplyError(Exception):
    """An object was not applied; the message says why in a few words, for the log."""


def _patcher(api: client.AdmissionregistrationV1Api, kind: str) -> Callable[..., Any]:
    """The client's patch method of `kind` (each returns its own model type)."""
    patchers: dict[str, Callable[..., Any]] = {
        "ValidatingAdmissionPolicy": api.patch_validating_admission_policy,
        "ValidatingAdmissionPolicyBinding": api.patch_validating_admission_policy_binding,
    }
    return patchers[kind]


def apply(api_client: client.ApiClient, objects: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Server-side apply `objects` (cluster-scoped admission policies and bindings) in order;
    returns `kind/name` -> `metadata.generation` as stored. Raises `ApplyError` at the first
    object the API server does not take or cannot be reached for."""
    api = client.AdmissionregistrationV1Api(api_client)
    stored: dict[str, int] = {}
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        try:
            answer = _patcher(api, kind)(
                name,
                obj,
                field_manager=FIELD_MANAGER,
                force=True,
                _content_type=APPLY_PATCH,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
        except ApiException as err:
            raise ApplyError(f"{kind} {name}: {_refusal(err)}") from err
        except (urllib3_exceptions.HTTPError, OSError) as err:
            host = api_client.configuration.host
            raise ApplyError(f"cannot reach the API server {host}: {failure(err)}") from err
        stored[f"{kind}/{name}"] = answer.metadata.generation  # the apiserver always sets it
    return stored


def _refusal(err: ApiException) -> str:
    """`answered 403 Forbidden: <the Status message>`: the apiserver's own reason says which
    verb and object (a missing object asks for `create`)."""
    try:
        message = json.loads(err.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        message = ""
    said = f"answered {err.status} {err.reason}"
    return f"{said}: {message}" if message else said
