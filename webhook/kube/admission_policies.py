"""Admission policy objects written whole with a JSON merge patch: how `policy sync` puts the
compiled final-state check (`webhook.compile`) into the apiserver.

Each object is sent as a merge patch (RFC 7386) of its labels and its whole spec, under the
field manager `lwgpu`. A merge patch replaces every list it names outright, so the spec
stored is exactly the one compiled, whoever wrote the object before. Server-side apply cannot
promise that: the install creates the objects (`kubectl apply --server-side`, Helm), their
field manager keeps owning the items of the `variables` and `matchConditions` lists (lists
of type map), and an apply that leaves an item out removes it only where no other manager
owns it. Measured on the real apiserver (tests/sync): a check applied over the installed
one kept the installed one's variables too. A merge patch needs only the `patch` verb and
never creates an object: a missing one is answered 404 (the install creates them; creating
admission policies is an escalation path the sidecar is not given). Patches of identical
content change nothing, so every replica writing the same objects agrees.
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
MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT_S = 10  # one hung request must not hold up the retries


class PatchError(Exception):
    """An object was not written; the message says why in a few words, for the log."""


def _patcher(api: client.AdmissionregistrationV1Api, kind: str) -> Callable[..., Any]:
    """The client's patch method of `kind` (each returns its own model type)."""
    patchers: dict[str, Callable[..., Any]] = {
        "ValidatingAdmissionPolicy": api.patch_validating_admission_policy,
        "ValidatingAdmissionPolicyBinding": api.patch_validating_admission_policy_binding,
    }
    return patchers[kind]


def patch_objects(
    api_client: client.ApiClient, objects: Sequence[dict[str, Any]]
) -> dict[str, int]:
    """Merge-patch the labels and the whole spec of `objects` (cluster-scoped admission
    policies and bindings, which exist) in order; returns `kind/name` -> `metadata.generation`
    as stored. Raises `PatchError` at the first object the API server does not take or cannot
    be reached for."""
    api = client.AdmissionregistrationV1Api(api_client)
    stored: dict[str, int] = {}
    for obj in objects:
        kind, name = obj["kind"], obj["metadata"]["name"]
        try:
            answer = _patcher(api, kind)(
                name,
                {"metadata": {"labels": obj["metadata"]["labels"]}, "spec": obj["spec"]},
                field_manager=FIELD_MANAGER,
                _content_type=MERGE_PATCH,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
        except ApiException as err:
            raise PatchError(f"{kind} {name}: {_refusal(err)}") from err
        except (urllib3_exceptions.HTTPError, OSError) as err:
            host = api_client.configuration.host
            raise PatchError(f"cannot reach the API server {host}: {failure(err)}") from err
        stored[f"{kind}/{name}"] = answer.metadata.generation  # the apiserver always sets it
    return stored


def _refusal(err: ApiException) -> str:
    """`answered 404 Not Found: <the Status message>`: the apiserver's own reason says which
    object, and which verb where it refused one."""
    try:
        message = json.loads(err.body or "{}").get("message", "")
    except (ValueError, AttributeError):
        message = ""
    said = f"answered {err.status} {err.reason}"
    return f"{said}: {message}" if message else said
