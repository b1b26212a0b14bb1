"""The server's TLS context: built once per worker, rebuilt when the certificate files change.

Kubernetes updates a mounted Secret in place (kubelet swaps a ``..data`` symlink) and
cert-manager or ``certs install`` rotate it while the webhook runs, so the certificate
must be picked up without a restart. gunicorn asks for an ``SSLContext`` on every accepted
connection; this cache answers with the same object and looks at the files (two
``stat`` calls) at most once per ``check_interval``, reading them only when a stat
changed and rebuilding only when their contents changed. A pair that does not load
(for example the key already replaced and the certificate not yet) keeps the previous
context, so no connection fails during a rotation; the next check tries again.

The files may also be missing or half-written when a worker (re)starts, so a worker never
starts from them. The server's processes share the last pair that loaded, as the bytes read,
in one file of the server's private directory (``last_good``): the master writes it at start,
a worker rewrites it (by rename) whenever it loads a new pair, and a new worker starts from it
(``resume``) before it checks the files. Contexts are built from those bytes, not by opening
the files again, so the pair served is always the pair that was checked.

With a client CA (``--client-ca``) the context also asks every client for a certificate and
verifies one that is presented against that CA. It is optional at the TLS layer because
kubelet's probes and Prometheus present none; the app refuses reviews without one. The CA
file is watched and reloaded like the pair, so the apiserver's client CA can rotate too.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from . import validity

# TLS 1.0 and 1.1 are deprecated (RFC 8996); the kube-apiserver speaks 1.2 and 1.3.
MINIMUM_VERSION = ssl.TLSVersion.TLSv1_2

# Joins the files' contents in the last good copy: PEM is text, so no file that loads holds one.
SEPARATOR = b"\0"

log = logging.getLogger(__name__)


@contextlib.contextmanager
def _private_file(directory: Path, data: bytes) -> Iterator[str]:
    # A new file of ours (mode 0600, in a directory only this server's user may enter),
    # removed on the way out unless the caller renamed it.
    fd, path = tempfile.mkstemp(dir=directory, suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def build_context(
    certificate: bytes, key: bytes, client_ca: bytes | None = None, *, directory: Path
) -> ssl.SSLContext:
    """A server-side context for the PEM pair, TLS 1.2 or newer; ``ssl.SSLError`` if bad.

    With ``client_ca``, a client certificate is requested and, when presented, must chain
    to that CA or the handshake fails; a client without one still connects. ``directory``
    holds the files ssl loads them from while it does.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = MINIMUM_VERSION
    # ssl loads certificates and keys from files only. One file, chain then key: what
    # load_cert_chain reads when given no separate keyfile.
    with _private_file(directory, certificate + b"\n" + key) as chain:
        context.load_cert_chain(certfile=chain)
    if client_ca is not None:
        with _private_file(directory, client_ca) as cafile:
            context.load_verify_locations(cafile=cafile)
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def _stat_key(path: str) -> tuple[int, int, int, int]:
    # os.stat follows symlinks, so a kubelet `..data` swap shows up as a new inode.
    st = os.stat(path)
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


def _read(path: str | Path) -> bytes:
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
        directory: str | os.PathLike[str],
        client_ca: str | os.PathLike[str] | None = None,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[datetime], None] | None = None,
    ) -> None:
        """Load the pair now; raise ``ssl.SSLError``/``OSError``/``ValueError`` when it is unusable.

        ``directory`` is the server's private directory (mode 0700) for the last good copy;
        ``on_change(not_after)`` is called after every successful (re)build from the files.
        """
        self.certfile = os.fspath(certfile)
        self.keyfile = os.fspath(keyfile)
        self.client_ca = None if client_ca is None else os.fspath(client_ca)
        self._files = (
            self.certfile,
            self.keyfile,
            *(() if client_ca is None else (self.client_ca,)),
        )
        self.directory = Path(directory)
        self.last_good = self.directory / "last-good"
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

    def resume(self) -> None:
        """Serve the last good copy, the newest pair any process of the server loaded.

        For a new worker, before it serves: it was forked with the pair the master loaded at
        start, and the files may be unusable right now. Never raises (a worker that fails
        to boot halts gunicorn): without the copy it keeps the pair it was forked with.
        """
        try:
            data = _read(self.last_good)
            if hashlib.sha256(data).digest() != self._digest:
                self._serve(data, *self._load(data))
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning(
                "cannot resume from %s: %s; serving the pair loaded at start", self.last_good, exc
            )
        # Check the files on the first connection, whatever the master saw of them.
        self._stats, self._next_check = None, 0.0

    def _refresh(self, *, raise_errors: bool) -> None:
        self._next_check = self._clock() + self._interval
        try:
            stats = tuple(_stat_key(path) for path in self._files)
            if stats == self._stats:
                return
            data = SEPARATOR.join(_read(path) for path in self._files)
            if hashlib.sha256(data).digest() != self._digest:
                context, not_after = self._load(data)
                self._keep(data)
                if self._context is not None:
                    log.info(
                        "TLS certificate reloaded from %s (expires %s)", self.certfile, not_after
                    )
                self._serve(data, context, not_after)
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

    def _load(self, data: bytes) -> tuple[ssl.SSLContext, datetime]:
        contents = data.split(SEPARATOR)
        if len(contents) != len(self._files):
            raise ValueError("a file holds a NUL byte: not PEM")
        certificate, key, *client_ca = contents
        not_after = validity.not_after(certificate)
        context = build_context(certificate, key, *client_ca, directory=self.directory)
        return context, not_after

    def _keep(self, data: bytes) -> None:
        # Written whole, then renamed over the last copy: a worker starting reads one or the other.
        with _private_file(self.directory, data) as written:
            os.replace(written, self.last_good)

    def _serve(self, data: bytes, context: ssl.SSLContext, not_after: datetime) -> None:
        self._context, self._not_after = context, not_after
        self._digest = hashlib.sha256(data).digest()
