"""Generated certificates in a real TLS handshake on loopback, with Python's hostname checking.

Also holds the handshake and ``openssl verify`` helpers the rotation tests reuse.
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

from certs import generate

SERVICE, NAMESPACE = "lwgpu", "lwgpu-system"
SANS = [
    "lwgpu",
    "lwgpu.lwgpu-system",
    "lwgpu.lwgpu-system.svc",
    "lwgpu.lwgpu-system.svc.cluster.local",
]


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            with self.server.context.wrap_socket(self.request, server_side=True) as tls:
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError):
            # A client that refuses our certificate aborts the handshake; that is its verdict.
            pass


class _TLSServer(socketserver.ThreadingTCPServer):
    daemon_threads = True


@contextlib.contextmanager
def tls_server(cert: Path, key: Path) -> Iterator[int]:
    """A TLS server on a free 127.0.0.1 port presenting ``cert``; yields the port."""
    server = _TLSServer(("127.0.0.1", 0), _Handler)
    server.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.context.load_cert_chain(cert, key)
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


def openssl_verify(cafile: Path, cert: Path, *extra: str) -> subprocess.CompletedProcess:
    """``openssl verify -CAfile`` on the certificate (``extra`` flags first), output captured."""
    command = ["openssl", "verify", *extra, "-CAfile", str(cafile), str(cert)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def run_certs(*args: str) -> subprocess.CompletedProcess:
    """``python -m certs ARGS`` in a child process, output captured as text."""
    command = [sys.executable, "-m", "certs", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")


@pytest.fixture(scope="module", params=["ecdsa-p256", "rsa-2048"])
def cert_dir(request, tmp_path_factory) -> Path:
    """A generated set per key type, with an extra DNS name and loopback IP for local use."""
    out = tmp_path_factory.mktemp(request.param)
    generate(
        out, SERVICE, NAMESPACE, key_type=request.param, dns=["webhook.local"], ips=["127.0.0.1"]
    )
    return out


@needs_openssl
def test_openssl_verifies_the_chain(cert_dir):
    result = openssl_verify(cert_dir / "ca.crt", cert_dir / "tls.crt")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK")


@pytest.mark.parametrize("name", [*SANS, "webhook.local", "127.0.0.1"])
def test_handshake_succeeds_for_each_san(cert_dir, name):
    with tls_server(cert_dir / "tls.crt", cert_dir / "tls.key") as port:
        assert handshake(port, cert_dir / "ca.crt", name) == b"ok"


@pytest.mark.parametrize(
    "name",
    [
        "other",
        "lwgpu.default.svc",
        "lwgpu.lwgpu-system.svc.cluster.example",
        "evil.lwgpu",
        "127.0.0.2",
        "localhost",
    ],
)
def test_handshake_fails_for_another_name(cert_dir, name):
    with (
        tls_server(cert_dir / "tls.crt", cert_dir / "tls.key") as port,
        pytest.raises(ssl.SSLCertVerificationError, match="match"),
    ):
        handshake(port, cert_dir / "ca.crt", name)


def test_handshake_fails_against_another_ca(cert_dir, tmp_path):
    generate(tmp_path, SERVICE, NAMESPACE)
    with (
        tls_server(cert_dir / "tls.crt", cert_dir / "tls.key") as port,
        pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"),
    ):
        handshake(port, tmp_path / "ca.crt", SANS[-1])
