"""What one replica of the webhook serves, asked at its pod address as a new client would: the
certificate it presents, the policy generation its workers load. Probes only: they trust any
certificate (the apiserver does the verifying, against the caBundle)."""

from __future__ import annotations

import socket
import ssl
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tools.cluster.install import WEBHOOK_PORT


def _probe_context() -> ssl.SSLContext:
    # The probes only look at what a replica serves; the apiserver does the verifying.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def served(address: str) -> bytes:
    """The certificate (DER) a replica presents to a new connection."""
    with (
        socket.create_connection((address, WEBHOOK_PORT), timeout=5) as raw,
        _probe_context().wrap_socket(raw) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def generation(address: str) -> float:
    """A replica's `lwgpu_policy_generation` (its workers' oldest policy)."""
    url = f"https://{address}:{WEBHOOK_PORT}/metrics"
    with urllib.request.urlopen(url, context=_probe_context(), timeout=5) as answer:
        text = answer.read().decode()
    samples = (s for f in text_string_to_metric_families(text) for s in f.samples)
    return next((s.value for s in samples if s.name == "lwgpu_policy_generation"), 0.0)
