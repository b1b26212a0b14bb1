"""Where the set lives in the cluster: two Secrets and a ConfigMap, split by who reads them.

- the CA Secret (``Opaque``: ``ca.crt``, ``ca.key``), which only the certificate Jobs read: the
  install, and the rotation, which signs serving certificates with the key;
- the serving Secret (``kubernetes.io/tls``: ``tls.crt``, ``tls.key``), the one the webhook
  mounts;
- the CA bundle ConfigMap (``ca.crt`` alone), for clients that verify the webhook, such as
  Prometheus, so that none of them needs to read a Secret.

Before the CA had a Secret of its own, the serving Secret held all four files. Such a Secret
still supplies the CA until the CA Secret holds it, and every write of the serving Secret
drops ``ca.crt`` and ``ca.key`` from it; the writers order their writes so that the CA Secret
is written first. Each write replaces the object as read (its ``resourceVersion``), so a
concurrent writer makes it a 409, which the callers retry from a fresh read.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from cryptography import x509
from kubernetes.client import CoreV1Api, V1ConfigMap, V1ObjectMeta, V1Secret

from .authority import PrivateKey
from .certset import CA_CRT, CA_KEY, FILE_NAMES, TLS_CRT, TLS_KEY, Authority, load_serving
from .errors import CertError
from .kubeapi import none_if_missing

SERVING_TYPE = "kubernetes.io/tls"
CA_TYPE = "Opaque"
MOVED = (CA_CRT, CA_KEY)  # what the serving Secret held before the CA had a Secret of its own
LABELS = {"app.kubernetes.io/managed-by": "lwgpu-certs"}


@dataclass(frozen=True)
class Places:
    """The names of the objects, all in ``namespace``; ``bundle`` None: no ConfigMap."""

    namespace: str
    serving: str
    ca: str
    bundle: str | None = None

    def source(self, kind: str, name: str) -> str:
        """How messages name an object."""
        return f"{kind} {self.namespace}/{name}"


@dataclass(frozen=True)
class Stored:
    """The objects as read (None: absent), kept for the conditional writes."""

    places: Places
    ca_secret: V1Secret | None
    serving_secret: V1Secret | None
    bundle_map: V1ConfigMap | None

    def ca_files(self) -> dict[str, bytes]:
        """The CA Secret's ``ca.crt`` and ``ca.key`` that are present and not empty."""
        return _files(self.ca_secret, CA_TYPE, self.places.source("Secret", self.places.ca))

    def serving_files(self) -> dict[str, bytes]:
        """The serving Secret's files that are present and not empty (``ca.*`` of an old
        install included)."""
        where = self.places.source("Secret", self.places.serving)
        return _files(self.serving_secret, SERVING_TYPE, where)

    def authority(self) -> Authority | None:
        """The CA: the CA Secret's, else that of a serving Secret written before the CA had a
        Secret of its own; None when neither holds one."""
        if files := self.ca_files():
            return Authority.from_files(files, self.places.source("Secret", self.places.ca))
        moved = {k: v for k, v in self.serving_files().items() if k in MOVED}
        where = self.places.source("Secret", self.places.serving)
        return Authority.from_files(moved, where) if moved else None

    def serving(self) -> tuple[x509.Certificate, PrivateKey] | None:
        """The serving certificate and key in the serving Secret; None when it holds none."""
        files = {k: v for k, v in self.serving_files().items() if k in (TLS_CRT, TLS_KEY)}
        return load_serving(files, self.places.source("Secret", self.places.serving))


def read(core: CoreV1Api, places: Places, *, with_bundle: bool) -> Stored:
    """The Secrets (and the ConfigMap, ``with_bundle`` and where it has a name) as stored."""
    ns = places.namespace
    ca = none_if_missing(lambda: core.read_namespaced_secret(places.ca, ns))
    serving = none_if_missing(lambda: core.read_namespaced_secret(places.serving, ns))
    bundle_name = places.bundle if with_bundle else None
    bundle = (
        None
        if bundle_name is None
        else none_if_missing(lambda: core.read_namespaced_config_map(bundle_name, ns))
    )
    return Stored(places, ca, serving, bundle)


def write_ca(core: CoreV1Api, stored: Stored, authority: Authority) -> str:
    """Bring the CA Secret to ``authority``: created, rotated or unchanged."""
    files = authority.to_files()
    held = stored.ca_files()
    if held == files:
        return "unchanged"
    places = stored.places
    _write_secret(core, places, places.ca, stored.ca_secret, CA_TYPE, files, drop=())
    return "rotated" if held else "created"


def write_serving(core: CoreV1Api, stored: Stored, files: dict[str, bytes]) -> str:
    """Bring the serving Secret to ``files`` (``tls.crt``, ``tls.key``) and drop the CA an
    older install kept there: created, rotated, migrated (only the CA dropped) or unchanged."""
    held = stored.serving_files()
    moved = any(name in held for name in MOVED)
    pair = {k: v for k, v in held.items() if k in (TLS_CRT, TLS_KEY)}
    if pair == files and not moved:
        return "unchanged"
    places = stored.places
    secret = stored.serving_secret
    _write_secret(core, places, places.serving, secret, SERVING_TYPE, files, drop=MOVED)
    if pair == files:
        return "migrated"
    return "rotated" if pair else "created"


def write_bundle(core: CoreV1Api, stored: Stored, pem: bytes) -> str:
    """Bring the CA bundle ConfigMap's ``ca.crt`` to ``pem``: created, rotated or unchanged."""
    places = stored.places
    if places.bundle is None:
        return "unchanged"
    current = stored.bundle_map
    held = (current.data or {}).get(CA_CRT) if current is not None else None
    if held == pem.decode():
        return "unchanged"
    if current is None:
        meta = V1ObjectMeta(name=places.bundle, namespace=places.namespace, labels=LABELS)
        body = V1ConfigMap(metadata=meta, data={CA_CRT: pem.decode()})
        core.create_namespaced_config_map(places.namespace, body)
        return "created"
    current.data = {**(current.data or {}), CA_CRT: pem.decode()}
    core.replace_namespaced_config_map(places.bundle, places.namespace, current)
    return "rotated" if held else "created"


def _write_secret(
    core: CoreV1Api,
    places: Places,
    name: str,
    secret: V1Secret | None,
    kind: str,
    files: dict[str, bytes],
    drop: tuple[str, ...],
) -> None:
    """Create the Secret, or replace it as read (a concurrent writer makes that a 409),
    keeping keys of others but ``drop``."""
    # Typed as the V1Secret field is (bytes | str); the values here are always base64 text.
    data: dict[str, bytes | str] = {
        key: base64.b64encode(pem).decode("ascii") for key, pem in files.items()
    }
    if secret is None:
        meta = V1ObjectMeta(name=name, namespace=places.namespace, labels=LABELS)
        core.create_namespaced_secret(
            places.namespace, V1Secret(metadata=meta, type=kind, data=data)
        )
        return
    kept = {k: v for k, v in (secret.data or {}).items() if k not in drop}
    secret.data = {**kept, **data}
    core.replace_namespaced_secret(name, places.namespace, secret)


def _files(secret: V1Secret | None, kind: str, source: str) -> dict[str, bytes]:
    """The set's files a Secret holds, present and not empty; none for no Secret."""
    if secret is None:
        return {}
    if secret.type != kind:
        raise CertError(f"{source} has type {secret.type}, expected {kind}")
    try:
        files = {
            k: base64.b64decode(v, validate=True)
            for k, v in (secret.data or {}).items()
            if k in FILE_NAMES
        }
    except (binascii.Error, ValueError):
        raise CertError(f"{source}: data is not valid base64") from None
    # An empty kubernetes.io/tls Secret is what manifests create so that pods can mount it.
    return {k: v for k, v in files.items() if v}
