"""Certificate helpers shared by the certs and server tests: the service names the generated
certificates cover, a TLS server presenting a certificate on loopback, a hostname-checking
handshake against it, `openssl verify` and `python -m certs` in a child process.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVICE, NAMESPACE = "lwgpu", "lwgpu-system"
SANS = [
    "lwgpu",
    "lwgpu.lwgpu-system",
    "lwgpu.lwgpu-system.svc",
    "lwgpu.lwgpu-system.svc.cluster.local",
]


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        assert isinstance(self.server, _TLSServer)
        try:
            with self.server.context.wrap_socket(self.request, server_side=True) as tls:
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError):
            # A client that refuses our certificate aborts the handshake; that is its verdict.
            pass


class _TLSServer(socketserver.ThreadingTCPServer):
    daemon_threads = True

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.context = context


@contextlib.contextmanager
def tls_server(cert: Path, key: Path) -> Iterator[int]:
    """A TLS server on a free 127.0.0.1 port presenting ``cert``; yields the port."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = _TLSServer(context)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def handshake(port: int, cafile: Path, name: str) -> bytes:
    """Connect checking the hostname ``name``, trusting only ``cafile``; the server's greeting."""
    context = ssl.create_default_context(cafile=str(cafile))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=name) as tls,
    ):
        return tls.recv(2)


def openssl_verify(cafile: Path, cert: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``openssl verify -CAfile`` on the certificate (``extra`` flags first), output captured."""
    command = ["openssl", "verify", *extra, "-CAfile", str(cafile), str(cert)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def run_certs(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m certs ARGS`` in a child process, output captured as text."""
    command = [sys.executable, "-m", "certs", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
