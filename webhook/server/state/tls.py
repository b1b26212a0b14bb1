"""The server's TLS context: built once per worker, rebuilt when the certificate files change.

Kubernetes updates a mounted Secret in place (kubelet swaps a ``..data`` symlink) and
cert-manager or ``certs install`` rotate it while the webhook runs, so the certificate
must be picked up without a restart. gunicorn asks for an ``SSLContext`` on every accepted
connection; this cache answers with the same object and looks at the files (two
``stat`` calls) at most once per ``check_interval``, reading them only when a stat
changed and rebuilding only when their contents changed. A pair that does not load
(for example the key already replaced and the certificate not yet) keeps the previous
context, so no connection fails during a rotation; the next check tries again.

With a client CA (``--client-ca``) the context also asks every client for a certificate and
verifies one that is presented against that CA. It is optional at the TLS layer because
kubelet's probes and Prometheus present none; the app refuses reviews without one. The CA
file is watched and reloaded like the pair, so the apiserver's client CA can rotate too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable
from datetime import datetime

from cryptography import x509

# TLS 1.0 and 1.1 are deprecated (RFC 8996); the kube-apiserver speaks 1.2 and 1.3.
MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2

log = logging.getLogger(__name__)


def build_context(certfile: str, keyfile: str, client_ca: str | None = None) -> ssl.SSLContext:
    """A server-side context for the pair, TLS 1.2 or newer; ``ssl.SSLError``/``OSError`` if bad.

    With ``client_ca``, a client certificate is requested and, when presented, must chain
    to that CA or the handshake fails; a client without one still connects.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = MINIMUM_VERSION
    context.load_cert_chain(certfile=certfile, keyfile=keyfile)
    if client_ca is not None:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _stat_key(path: str) -> tuple[int, int, int, int]:
    # os.stat follows symlinks, so a kubelet `..data` swap shows up as a new inode.
    st = os.stat(path)
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


class CertificateReloader:
    """A cached ``SSLContext`` for ``certfile``/``keyfile`` (and ``client_ca``) that follows
    changes to the files.

    Thread-safe; one instance per process (gunicorn forks it into each worker).
    """

    def __init__(
        self,
        certfile: str | os.PathLike[str],
        keyfile: str | os.PathLike[str],
        *,
        client_ca: str | os.PathLike[str] | None = None,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[datetime], None] | None = None,
    ) -> None:
        """Load the pair now; raise ``ssl.SSLError``/``OSError``/``ValueError`` when it is unusable.

        ``on_change(not_after)`` is called after every successful (re)build.
        """
        self.certfile = os.fspath(certfile)
        self.keyfile = os.fspath(keyfile)
        self.client_ca = None if client_ca is None else os.fspath(client_ca)
        self._files = (
            self.certfile,
            self.keyfile,
            *(() if client_ca is None else (self.client_ca,)),
        )
        self._interval = check_interval
        self._clock = clock
        self.on_change = on_change
        self._lock = threading.Lock()
        self._next_check = 0.0
        self._stats: object = None
        self._digest = b""
        self._context: ssl.SSLContext | None = None
        self._not_after: datetime | None = None
        self.error: str | None = None
        self._refresh(raise_errors=True)

    @property
    def not_after(self) -> datetime:
        """Expiry (UTC) of the certificate the current context serves."""
        assert self._not_after is not None
        return self._not_after

    def context(self) -> ssl.SSLContext:
        """The context for a new connection; checks the files when the interval has passed."""
        if self._clock() >= self._next_check:
            with self._lock:
                if self._clock() >= self._next_check:
                    self._refresh(raise_errors=False)
        assert self._context is not None
        return self._context

    def _refresh(self, *, raise_errors: bool) -> None:
        self._next_check = self._clock() + self._interval
        try:
            stats = tuple(_stat_key(path) for path in self._files)
            if stats == self._stats:
                return
            contents = [_read(path) for path in self._files]
            digest = hashlib.sha256(b"\0".join(contents)).digest()
            if digest != self._digest:
                not_after = x509.load_pem_x509_certificate(contents[0]).not_valid_after_utc
                context = build_context(self.certfile, self.keyfile, self.client_ca)
                if self._context is not None:
                    log.info(
                        "TLS certificate reloaded from %s (expires %s)", self.certfile, not_after
                    )
                self._context, self._not_after, self._digest = context, not_after, digest
                if self.on_change is not None:
                    self.on_change(not_after)
            # Remembered only once the pair loaded, so a half-rotated pair is retried next check.
            self._stats = stats
            self.error = None
        except (OSError, ssl.SSLError, ValueError) as exc:
            ca = "" if self.client_ca is None else f" / client CA {self.client_ca}"
            self.error = (
                f"cannot load TLS certificate {self.certfile} / key {self.keyfile}{ca}: {exc}"
            )
            if raise_errors:
                raise
            log.warning("%s; still serving the previous certificate", self.error)
