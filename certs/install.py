"""The in-cluster installer: keep the set in a Secret and its CA bundle in webhook configurations.

Like ingress-nginx's kube-webhook-certgen, but with rotation. The Kubernetes client is a
parameter; the CLI builds it. Order matters for availability: the webhook configurations
get the new ``caBundle`` (which still holds the old CA) before the Secret changes, so the
apiserver already trusts whatever certificate the pods load next. Every write is a
conditional one (``resourceVersion``), re-read and retried a bounded number of times on 409.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TypeVar

import urllib3
from kubernetes.client import (
    AdmissionregistrationV1Api,
    ApiClient,
    CoreV1Api,
    V1MutatingWebhook,
    V1MutatingWebhookConfiguration,
    V1ObjectMeta,
    V1Secret,
    V1ValidatingWebhook,
    V1ValidatingWebhookConfiguration,
)
from kubernetes.client.exceptions import ApiException

from .authority import Spec
from .certset import FILE_NAMES, CertSet
from .errors import CertError
from .rotation import ensure

MAX_ATTEMPTS = 5
SECRET_TYPE = "kubernetes.io/tls"
KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
T = TypeVar("T")


@dataclass(frozen=True)
class InstallResult:
    """What one run did: ``secret`` is created/rotated/unchanged; ``patched`` lists kind/name."""

    secret: str
    patched: tuple[str, ...]
    ca_bundle: str

    @property
    def wrote(self) -> bool:
        """Whether anything in the cluster changed."""
        return self.secret != "unchanged" or bool(self.patched)


def install(
    api_client: ApiClient,
    spec: Spec,
    secret_name: str,
    webhook_configs: Sequence[str],
    *,
    now: datetime | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> InstallResult:
    """Create or rotate Secret ``spec.namespace/secret_name``; patch every named configuration.

    Each name must exist as a MutatingWebhookConfiguration, a ValidatingWebhookConfiguration
    or both; otherwise nothing is written. API failures become a one-line CertError.
    """
    core, admission = CoreV1Api(api_client), AdmissionregistrationV1Api(api_client)
    now = now or datetime.now(UTC)
    patched: list[str] = []  # across attempts: a retried run still reports what it patched
    try:
        targets = [target for name in webhook_configs for target in _resolve(admission, name)]
        once = partial(
            _install_once, core, admission, spec, secret_name, targets, now, patched, max_attempts
        )
        secret_state, bundle = _retry(once, f"Secret {spec.namespace}/{secret_name}", max_attempts)
    except ApiException as exc:
        raise CertError(_describe(exc)) from None
    except urllib3.exceptions.HTTPError as exc:
        raise CertError(f"cannot reach the Kubernetes API: {exc}") from None
    return InstallResult(secret_state, tuple(dict.fromkeys(patched)), bundle)


def _install_once(
    core: CoreV1Api,
    admission: AdmissionregistrationV1Api,
    spec: Spec,
    secret_name: str,
    targets: Sequence[tuple[str, str]],
    now: datetime,
    patched: list[str],
    attempts: int,
) -> tuple[str, str]:
    """One read-decide-write pass; returns (what happened to the Secret, the caBundle)."""
    secret = _read_secret(core, spec.namespace, secret_name)
    existing = _decode(secret, f"Secret {spec.namespace}/{secret_name}")
    cert_set, changed = ensure(existing, spec, now)
    bundle = cert_set.ca_bundle_b64()
    for kind, name in targets:
        patch = partial(_patch_ca_bundle, admission, kind, name, bundle)
        if _retry(patch, f"{kind} {name}", attempts):
            patched.append(f"{kind}/{name}")
    if not changed:
        return "unchanged", bundle
    # Typed as the V1Secret field is (bytes | str); the values here are always base64 text.
    data: dict[str, bytes | str] = {
        name: base64.b64encode(pem).decode("ascii") for name, pem in cert_set.to_files().items()
    }
    if secret is None:
        meta = V1ObjectMeta(
            name=secret_name,
            namespace=spec.namespace,
            labels={"app.kubernetes.io/managed-by": "lwgpu-certs"},
        )
        core.create_namespaced_secret(
            spec.namespace, V1Secret(metadata=meta, type=SECRET_TYPE, data=data)
        )
        return "created", bundle
    # A PUT of the object as read carries its resourceVersion: a concurrent writer makes it a 409.
    secret.data = {**(secret.data or {}), **data}
    core.replace_namespaced_secret(secret_name, spec.namespace, secret)
    return ("rotated" if existing else "created"), bundle


def _resolve(admission: AdmissionregistrationV1Api, name: str) -> list[tuple[str, str]]:
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
    return _none_if_missing(lambda: read(name))


def _read_secret(core: CoreV1Api, namespace: str, name: str) -> V1Secret | None:
    return _none_if_missing(lambda: core.read_namespaced_secret(name, namespace))


def _patch_ca_bundle(
    admission: AdmissionregistrationV1Api, kind: str, name: str, bundle: str
) -> bool:
    """Set caBundle on every webhook that lacks it; False when all already match (no request)."""
    config = _read_config(admission, kind, name)
    if config is None:
        raise CertError(f"{kind} {name} was deleted while installing")
    # Annotated so that both kinds' webhook lists read as one sequence type.
    hooks: Sequence[V1MutatingWebhook | V1ValidatingWebhook] = config.webhooks or []
    stale = [i for i, hook in enumerate(hooks) if _as_text(hook.client_config.ca_bundle) != bundle]
    if not stale:
        return False
    version = config.metadata.resource_version if config.metadata else None
    if version is None:
        # Every apiserver sets it; without it the patch below would not be conditional.
        raise CertError(f"{kind} {name} came back without metadata.resourceVersion")
    # The resourceVersion in the patch makes it conditional: indices cannot shift underneath it.
    ops = [
        {
            "op": "replace",
            "path": "/metadata/resourceVersion",
            "value": version,
        }
    ]
    ops += [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
        for i in stale
    ]
    patch = (
        admission.patch_mutating_webhook_configuration
        if kind == KINDS[0]
        else admission.patch_validating_webhook_configuration
    )
    patch(name, ops, _content_type="application/json-patch+json")
    return True


def _decode(secret: V1Secret | None, source: str) -> CertSet | None:
    """The set held in the Secret; None for no Secret or one whose four keys are absent or empty."""
    if secret is None:
        return None
    if secret.type != SECRET_TYPE:
        raise CertError(f"{source} has type {secret.type}, expected {SECRET_TYPE}")
    try:
        files = {
            k: base64.b64decode(v, validate=True)
            for k, v in (secret.data or {}).items()
            if k in FILE_NAMES
        }
    except (binascii.Error, ValueError):
        raise CertError(f"{source}: data is not valid base64") from None
    files = {k: v for k, v in files.items() if v}
    # An empty kubernetes.io/tls Secret is what manifests create so that pods can mount it.
    return CertSet.from_files(files, source) if files else None


def _retry(step: Callable[[], T], what: str, attempts: int) -> T:
    for _ in range(attempts):
        try:
            return step()
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise CertError(f"{what} kept changing under us: gave up after {attempts} conflicts")


def _none_if_missing(read: Callable[[], T]) -> T | None:
    try:
        return read()
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _as_text(value: bytes | str | None) -> str | None:
    return value.decode("ascii") if isinstance(value, bytes) else value


def _describe(exc: ApiException) -> str:
    try:
        message = json.loads(exc.body or "").get("message", "")
    except (ValueError, AttributeError):
        message = ""
    detail = message or exc.body or "no details"
    return f"Kubernetes API answered {exc.status} {exc.reason}: {detail}"
