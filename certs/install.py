"""The in-cluster installer: keep the set in a Secret and its CA bundle in webhook configurations.

Like ingress-nginx's kube-webhook-certgen, but with rotation. The Kubernetes client is a
parameter; the CLI builds it. Order matters for availability: the webhook configurations
get the new ``caBundle`` (which still holds the old CA) before the Secret changes, so the
apiserver already trusts whatever certificate the pods load next. Every write is a
conditional one (``resourceVersion``), re-read and retried a bounded number of times on 409.

Two installers at once each write their own new CA into the caBundles before their Secret
write, and only one Secret write wins: so a caBundle write keeps a CA it finds there that
is not in its own bundle while that CA is ``IN_FLIGHT`` (another installer may be about to
write a Secret signed by it), and a run writes its Secret only while its own new CA is
still that young. The loser drops its own CA again; a CA left by an installer killed before
its Secret write goes with the first run after ``IN_FLIGHT``. tests/certs/
test_install_interrupted.py kills the command after each write and races two of them.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TypeVar

import urllib3
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
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

from .authority import BACKDATE, Spec
from .certset import FILE_NAMES, CertSet
from .errors import CertError
from .rotation import ensure

MAX_ATTEMPTS = 5
SECRET_TYPE = "kubernetes.io/tls"
KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
# How long after its issue another installer's CA is kept in a caBundle: far longer than a
# run between its first caBundle write and its Secret write (a dozen requests, seconds).
IN_FLIGHT = timedelta(minutes=10)
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
    run = _Run(now, max_attempts)
    try:
        targets = [target for name in webhook_configs for target in _resolve(admission, name)]
        once = partial(_install_once, core, admission, spec, secret_name, targets, run, patched)
        secret_state, bundle = _retry(once, f"Secret {spec.namespace}/{secret_name}", max_attempts)
    except ApiException as exc:
        raise CertError(_describe(exc)) from None
    except urllib3.exceptions.HTTPError as exc:
        raise CertError(f"cannot reach the Kubernetes API: {exc}") from None
    return InstallResult(secret_state, tuple(dict.fromkeys(patched)), bundle)


@dataclass
class _Run:
    """What the attempts of one run share: its time, and the CAs it issued in vain."""

    now: datetime
    attempts: int
    # CAs of attempts whose Secret write lost (409): no certificate signed by one exists.
    abandoned: list[x509.Certificate] = field(default_factory=list)

    def keeps(self, ca: x509.Certificate) -> bool:
        """Whether a caBundle write keeps ``ca``, found there but not in its own bundle."""
        issued = ca.not_valid_before_utc + BACKDATE
        return self.now - issued < IN_FLIGHT and ca not in self.abandoned


def _install_once(
    core: CoreV1Api,
    admission: AdmissionregistrationV1Api,
    spec: Spec,
    secret_name: str,
    targets: Sequence[tuple[str, str]],
    run: _Run,
    patched: list[str],
) -> tuple[str, str]:
    """One read-decide-write pass; returns (what happened to the Secret, the caBundle)."""
    started = time.monotonic()
    secret = _read_secret(core, spec.namespace, secret_name)
    existing = _decode(secret, f"Secret {spec.namespace}/{secret_name}")
    cert_set, changed = ensure(existing, spec, run.now)
    for kind, name in targets:
        patch = partial(_patch_ca_bundle, admission, kind, name, cert_set.ca_bundle, run.keeps)
        if _retry(patch, f"{kind} {name}", run.attempts):
            patched.append(f"{kind}/{name}")
    bundle = cert_set.ca_bundle_b64()
    if not changed:
        return "unchanged", bundle
    if time.monotonic() - started > IN_FLIGHT.total_seconds() / 2:
        # Others keep our new CA in the caBundles for IN_FLIGHT only; too close to it, stop.
        raise CertError(
            f"more than {IN_FLIGHT / 2} between issuing the new CA and writing the Secret: "
            "left the Secret as it was; run again"
        )
    issued = [ca for ca in cert_set.ca_bundle if existing is None or ca not in existing.ca_bundle]
    try:
        return _write_secret(core, spec, secret_name, secret, existing, cert_set), bundle
    except ApiException as exc:
        if exc.status == 409:
            run.abandoned.extend(issued)
        raise


def _write_secret(
    core: CoreV1Api,
    spec: Spec,
    secret_name: str,
    secret: V1Secret | None,
    existing: CertSet | None,
    cert_set: CertSet,
) -> str:
    """Create the Secret or replace it as read; what happened to it (created/rotated)."""
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
        return "created"
    # A PUT of the object as read carries its resourceVersion: a concurrent writer makes it a 409.
    secret.data = {**(secret.data or {}), **data}
    core.replace_namespaced_secret(secret_name, spec.namespace, secret)
    return "rotated" if existing else "created"


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
