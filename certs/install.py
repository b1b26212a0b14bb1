"""The in-cluster installer: keep the set in its Secrets and its CA bundle in webhook
configurations.

Like ingress-nginx's kube-webhook-certgen, but with rotation. The Kubernetes client is a
parameter; the CLI builds it. Order matters for availability: the webhook configurations
get the new ``caBundle`` (which still holds the old CA) before the CA Secret changes, and the
serving Secret, the one the webhook mounts, changes last, so the apiserver already trusts
whatever certificate the pods load next. Every write is a conditional one
(``resourceVersion``), re-read and retried a bounded number of times on 409.

The install is the only run that writes caBundles, so it is the one that starts or rolls a CA
(the daily rotation, certs/rotate.py, only re-issues serving certificates under the CA it
finds). It also moves the CA out of the serving Secret of an older install (certs/stored.py).

Two installers at once each write their own new CA into the caBundles before their CA Secret
write, and only one CA Secret write wins: so a caBundle write keeps a CA it finds there that
is not in its own bundle while that CA is ``IN_FLIGHT`` (another installer may be about to
write a certificate signed by it), and a run writes its CA Secret only while its own new CA is
still that young. The loser drops its own CA again; a CA left by an installer killed before
its CA Secret write goes with the first run after ``IN_FLIGHT``. tests/certs/
test_install_interrupted.py kills the command after each write and races two of them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial

from cryptography import x509
from kubernetes.client import AdmissionregistrationV1Api, ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from .authority import BACKDATE, Spec
from .cabundle import patch_ca_bundle, resolve
from .errors import CertError
from .kubeapi import MAX_ATTEMPTS, calling, retry
from .rotation import ensure, from_parts
from .stored import Places, read, write_bundle, write_ca, write_serving

# How long after its issue another installer's CA is kept in a caBundle: far longer than a
# run between its first caBundle write and its CA Secret write (a dozen requests, seconds).
IN_FLIGHT = timedelta(minutes=10)


@dataclass(frozen=True)
class InstallResult:
    """What one run did to each object: ``secret`` (the serving Secret), ``ca_secret`` and
    ``bundle`` (the ConfigMap) are created/rotated/unchanged (the serving Secret also
    migrated: only the old CA files dropped); ``patched`` lists kind/name."""

    secret: str
    ca_secret: str
    bundle: str
    patched: tuple[str, ...]
    ca_bundle: str

    @property
    def wrote(self) -> bool:
        """Whether anything in the cluster changed."""
        states = (self.secret, self.ca_secret, self.bundle)
        return any(state != "unchanged" for state in states) or bool(self.patched)


def install(
    api_client: ApiClient,
    spec: Spec,
    places: Places,
    webhook_configs: Sequence[str],
    *,
    now: datetime | None = None,
    max_attempts: int = MAX_ATTEMPTS,
) -> InstallResult:
    """Create or rotate the set in ``places`` (in ``spec.namespace``); patch every named
    configuration.

    Each name must exist as a MutatingWebhookConfiguration, a ValidatingWebhookConfiguration
    or both; otherwise nothing is written. API failures become a one-line CertError.
    """
    core, admission = CoreV1Api(api_client), AdmissionregistrationV1Api(api_client)
    patched: list[str] = []  # across attempts: a retried run still reports what it patched
    run = _Run(now or datetime.now(UTC), max_attempts)

    def attempts() -> InstallResult:
        targets = [target for name in webhook_configs for target in resolve(admission, name)]
        once = partial(_install_once, core, admission, spec, places, targets, run, patched)
        return retry(once, f"the certificate set in {places.namespace}", max_attempts)

    return calling(attempts)


@dataclass
class _Run:
    """What the attempts of one run share: its time, and the CAs it issued in vain."""

    now: datetime
    attempts: int
    # CAs of attempts whose CA Secret write lost (409): no certificate signed by one exists.
    abandoned: list[x509.Certificate] = field(default_factory=list)

    def keeps(self, ca: x509.Certificate) -> bool:
        """Whether a caBundle write keeps ``ca``, found there but not in its own bundle."""
        issued = ca.not_valid_before_utc + BACKDATE
        return self.now - issued < IN_FLIGHT and ca not in self.abandoned


def _install_once(
    core: CoreV1Api,
    admission: AdmissionregistrationV1Api,
    spec: Spec,
    places: Places,
    targets: Sequence[tuple[str, str]],
    run: _Run,
    patched: list[str],
) -> InstallResult:
    """One read-decide-write pass."""
    started = time.monotonic()
    stored = read(core, places, with_bundle=True)
    # Both read first: a Secret that cannot be read is refused before anything is written.
    authority, serving = stored.authority(), stored.serving()
    existing = None if authority is None else from_parts(authority, serving, spec, run.now)[0]
    cert_set, _ = ensure(existing, spec, run.now)
    for kind, name in targets:
        patch = partial(patch_ca_bundle, admission, kind, name, cert_set.ca_bundle, run.keeps)
        if retry(patch, f"{kind} {name}", run.attempts):
            patched.append(f"{kind}/{name}")
    issued = [ca for ca in cert_set.ca_bundle if authority is None or ca not in authority.bundle]
    if issued and time.monotonic() - started > IN_FLIGHT.total_seconds() / 2:
        # Others keep our new CA in the caBundles for IN_FLIGHT only; too close to it, stop.
        raise CertError(
            f"more than {IN_FLIGHT / 2} between issuing the new CA and writing the CA Secret: "
            "left the Secrets as they were; run again"
        )
    try:
        ca_state = write_ca(core, stored, cert_set.authority)
    except ApiException as exc:
        if exc.status == 409:
            run.abandoned.extend(issued)
        raise
    # The bundle's readers (Prometheus) trust the new CA before the webhook serves under it.
    bundle_state = write_bundle(core, stored, cert_set.bundle_pem())
    return InstallResult(
        secret=write_serving(core, stored, cert_set.serving_files()),
        ca_secret=ca_state,
        bundle=bundle_state,
        patched=tuple(dict.fromkeys(patched)),
        ca_bundle=cert_set.ca_bundle_b64(),
    )
