"""The ``caBundle`` of the webhook configurations: only the install writes it.

Each webhook configuration is named, not kinded: a name is looked up as a
MutatingWebhookConfiguration and as a ValidatingWebhookConfiguration (a 404 means "not this
kind"). A write is a JSON patch of ``webhooks[i].clientConfig.caBundle`` alone, conditional on
the ``resourceVersion`` read: the ValidatingAdmissionPolicy ``lwgpu-certs`` (deploy/base/
certs-policy.yaml) refuses the certificate identity any other change.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes.client import (
    AdmissionregistrationV1Api,
    V1MutatingWebhook,
    V1MutatingWebhookConfiguration,
    V1ValidatingWebhook,
    V1ValidatingWebhookConfiguration,
)

from .errors import CertError
from .kubeapi import none_if_missing

KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def resolve(admission: AdmissionregistrationV1Api, name: str) -> list[tuple[str, str]]:
    """(kind, name) for each kind under which ``name`` exists; neither is a CertError."""
    found = [(kind, name) for kind in KINDS if _read_config(admission, kind, name) is not None]
    if not found:
        raise CertError(
            f'webhook configuration "{name}" exists neither as a {KINDS[0]} nor as a {KINDS[1]}'
        )
    return found


def _read_config(
    admission: AdmissionregistrationV1Api, kind: str, name: str
) -> V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration | None:
    read = (
        admission.read_mutating_webhook_configuration
        if kind == KINDS[0]
        else admission.read_validating_webhook_configuration
    )
    return none_if_missing(lambda: read(name))


def patch_ca_bundle(
    admission: AdmissionregistrationV1Api,
    kind: str,
    name: str,
    bundle: Sequence[x509.Certificate],
    keeps: Callable[[x509.Certificate], bool],
) -> bool:
    """Set each webhook's caBundle to ``bundle`` and the other CAs it holds that ``keeps``
    accepts; False when all already match (no request)."""
    config = _read_config(admission, kind, name)
    if config is None:
        raise CertError(f"{kind} {name} was deleted while installing")
    # Annotated so that both kinds' webhook lists read as one sequence type.
    hooks: Sequence[V1MutatingWebhook | V1ValidatingWebhook] = config.webhooks or []
    wanted = [_with_kept(bundle, hook.client_config.ca_bundle, keeps) for hook in hooks]
    stale = [
        (i, want)
        for i, (hook, want) in enumerate(zip(hooks, wanted, strict=True))
        if _as_text(hook.client_config.ca_bundle) != want
    ]
    if not stale:
        return False
    version = config.metadata.resource_version if config.metadata else None
    if version is None:
        # Every apiserver sets it; without it the patch below would not be conditional.
        raise CertError(f"{kind} {name} came back without metadata.resourceVersion")
    # The resourceVersion in the patch makes it conditional: indices cannot shift underneath it.
    ops = [{"op": "replace", "path": "/metadata/resourceVersion", "value": version}]
    ops += [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want}
        for i, want in stale
    ]
    patch = (
        admission.patch_mutating_webhook_configuration
        if kind == KINDS[0]
        else admission.patch_validating_webhook_configuration
    )
    patch(name, ops, _content_type="application/json-patch+json")
    return True


def _with_kept(
    bundle: Sequence[x509.Certificate],
    current: bytes | str | None,
    keeps: Callable[[x509.Certificate], bool],
) -> str:
    """The caBundle to write: ``bundle``, then the CAs of ``current`` outside it that ``keeps``
    accepts (a caBundle that is no PEM, as a manifest's placeholder, holds none)."""
    try:
        found = x509.load_pem_x509_certificates(base64.b64decode(current or ""))
    except ValueError:
        found = []
    kept = [ca for ca in found if ca not in bundle and keeps(ca)]
    return base64.b64encode(
        b"".join(ca.public_bytes(Encoding.PEM) for ca in (*bundle, *kept))
    ).decode()


def _as_text(value: bytes | str | None) -> str | None:
    return value.decode("ascii") if isinstance(value, bytes) else value
