"""The daily rotation: re-issue the serving certificate under the CA the install left.

It reads the CA Secret (the key signs the new certificate) and writes only the serving Secret:
never a caBundle, a CA, or anything outside the two Secrets, which is why its identity holds no
right on the webhook configurations (deploy/base/certs.yaml). A serving re-issue under the same
CA needs none: the caBundle is that CA, unchanged. What only the install may do, rolling a CA
that is due or dropping an expired one from the bundle, is reported back as ``left``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from kubernetes.client import ApiClient, CoreV1Api

from .authority import Spec
from .errors import CertError
from .kubeapi import MAX_ATTEMPTS, calling, retry
from .rotation import from_parts, renew_serving
from .stored import Places, read, write_serving


@dataclass(frozen=True)
class RotateResult:
    """``secret``: what happened to the serving Secret (created/rotated/migrated/unchanged);
    ``left``: one line per renewal only the install can make."""

    secret: str
    left: tuple[str, ...]


def rotate(
    api_client: ApiClient,
    spec: Spec,
    places: Places,
    *,
    now: datetime | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> RotateResult:
    """Re-issue the serving certificate in ``places.serving`` when it is due, signed by the
    CA in ``places.ca``; a missing CA or serving Secret is a CertError (the install makes
    them). API failures become a one-line CertError."""
    core = CoreV1Api(api_client)
    once = partial(_rotate_once, core, spec, places, now or datetime.now(UTC))
    return calling(lambda: retry(once, f"Secret {places.namespace}/{places.serving}", max_attempts))


def _rotate_once(core: CoreV1Api, spec: Spec, places: Places, now: datetime) -> RotateResult:
    stored = read(core, places, with_bundle=False)
    authority = stored.authority() if stored.ca_files() else None
    if authority is None or stored.serving_secret is None:
        missing = places.ca if authority is None else places.serving
        raise CertError(
            f"Secret {places.namespace}/{missing} holds no certificate to rotate: "
            "the install (Job lwgpu-certs, `certs install`) creates it"
        )
    cert_set, left = renew_serving(from_parts(authority, stored.serving(), spec, now)[0], spec, now)
    return RotateResult(write_serving(core, stored, cert_set.serving_files()), left)
