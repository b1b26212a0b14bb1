"""TLS of the admission server: verified names, refused protocols, certificates swapped live.

The swap tests rotate the files the way Kubernetes does (kubelet's own AtomicWriter swaps the
Secret volume's ``..data`` symlink; skipped where it is not built, see tests/support/volumes.py)
and the way ``certs generate`` does (key, then certificate, each replaced atomically), while a
client keeps sending reviews.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import ssl
import threading
import time

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from tests.support.builders import admission_review, gpu_pod
from tests.support.paths import REPO
from tests.support.volumes import install_secret
from tools.loopback.https_client import SNI, Connection, client_context
from tools.loopback.server import install_file_by_file, make_certs, serving
from tools.waiting import wait_for
from webhook.server.state.tls import CertificateReloader
from webhook.server.transport.connection import PLAIN_HTTP_ANSWER

POLICY = REPO / "policies" / "default.yaml"
REVIEW = admission_review(gpu_pod({"aliyun.com/gpu-mem": 2}), uid="tls-review")


@pytest.fixture(scope="module")
def cert_sets(tmp_path_factory):
    """Two independent certificate sets (own CA each); B lives 30 days so its expiry differs."""
    root = tmp_path_factory.mktemp("certsets")
    return make_certs(root / "a"), make_certs(root / "b", days=30)


@pytest.fixture(scope="module")
def server_options(cert_sets):
    """The module's server presents certificate set A."""
    return {"tls_dir": cert_sets[0]}


def peer_der(sock: ssl.SSLSocket) -> bytes:
    return sock.getpeercert(binary_form=True)


@pytest.mark.parametrize(
    "name", [SNI, f"{SNI}.cluster.local", "lwgpu-webhook.lwgpu-system", "localhost"]
)
def test_certificate_verifies_for_service_names(server, name):
    conn = server.connect(server_hostname=name)
    with contextlib.closing(conn):
        status, body = conn.review("validate", REVIEW)
        assert conn.sock.version() in ("TLSv1.2", "TLSv1.3")
    assert status == 200 and body["response"]["uid"] == "tls-review"


def test_certificate_for_another_name_is_rejected(server):
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        server.connect(server_hostname="lwgpu-webhook.other-namespace.svc").call("GET", "/healthz")


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
@pytest.mark.parametrize(
    "version,accepted",
    [
        (ssl.TLSVersion.TLSv1, False),
        (ssl.TLSVersion.TLSv1_1, False),
        (ssl.TLSVersion.TLSv1_2, True),
        (ssl.TLSVersion.TLSv1_3, True),
    ],
    ids=["tls1.0", "tls1.1", "tls1.2", "tls1.3"],
)
def test_protocol_versions(server, version, accepted):
    context = client_context(server.ca)
    # The client offers only `version`, old ciphers allowed, so a refusal is the server's.
    context.set_ciphers("ALL:@SECLEVEL=0")
    context.minimum_version = context.maximum_version = version
    if accepted:
        conn = Connection(server.port, context)
        with contextlib.closing(conn):
            assert conn.call("GET", "/healthz")[0] == 200
    else:
        with pytest.raises(ssl.SSLError) as refused:
            Connection(server.port, context).call("GET", "/healthz")
        assert refused.value.reason == "TLSV1_ALERT_PROTOCOL_VERSION"  # alert sent by the server


def test_plain_http_is_refused(server):
    # Answered as Go's net/http answers it (server.go, conn.serve: "Client sent an HTTP
    # request to an HTTPS server."), before TLS and without reaching the app.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(4096):
                reply += chunk
    assert reply == PLAIN_HTTP_ANSWER


class ReviewLoop(threading.Thread):
    """Sends reviews on new connections until stopped; records each outcome and peer cert."""

    def __init__(self, port: int, context: ssl.SSLContext):
        super().__init__(daemon=True)
        self.port, self.context = port, context
        self.results: list[tuple[float, object, bytes | None]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        # Bounded: the test stops it within seconds, and 2000 requests is far more than needed.
        while not self.stop.is_set() and len(self.results) < 2000:
            conn = Connection(self.port, self.context)
            try:
                status, body = conn.review("mutate", REVIEW)
                self.results.append(
                    (time.monotonic(), (status, body["response"]["uid"]), peer_der(conn.sock))
                )
            except Exception as exc:
                self.results.append((time.monotonic(), exc, None))
            finally:
                conn.close()


# How a new certificate set reaches the directory the server reads: (live, set) -> None.
INSTALLS = {
    "kubelet-secret-volume": install_secret,
    # The version only names the temporary files it renames from: any will do.
    "certs-generate": lambda live, source: install_file_by_file(live, source, source.name),
}


@pytest.mark.parametrize("how", list(INSTALLS))
def test_swapped_certificate_is_served_without_failed_requests(tmp_path, cert_sets, how):
    install, (first, second) = INSTALLS[how], cert_sets
    live = tmp_path / "live"
    install(live, first)
    new_der = x509.load_pem_x509_certificate((second / "tls.crt").read_bytes()).public_bytes(
        Encoding.DER
    )
    # The probe's CA given: the Secret volume holds the serving pair only.
    with serving(tmp_path, POLICY, live, ca=first / "ca.crt") as server:
        loop = ReviewLoop(server.port, client_context(first / "ca.crt", second / "ca.crt"))
        loop.start()
        try:
            wait_for(lambda: len(loop.results) >= 5, what="reviews with the first certificate")
            swapped_at = time.monotonic()
            install(live, second)
            # Every worker has switched once 20 reviews in a row arrived with the new certificate.
            wait_for(
                lambda: [r[2] for r in loop.results[-20:]] == [new_der] * 20,
                timeout=15,
                what="20 reviews in a row with the new certificate",
            )
        finally:
            loop.stop.set()
            loop.join(10)
    failures = [r[1] for r in loop.results if r[1] != (200, "tls-review")]
    assert failures == []
    first_new = next(r[0] for r in loop.results if r[2] == new_der)
    print(
        f"\n{how}: new certificate served {first_new - swapped_at:.3f}s after swap, "
        f"{len(loop.results)} reviews, none failed"
    )
    assert first_new - swapped_at < 5


def test_readyz_fails_while_the_certificate_is_unreadable(tmp_path, cert_sets):
    live = shutil.copytree(cert_sets[0], tmp_path / "live")
    with serving(tmp_path, POLICY, live) as server:
        # serving() returns once one worker answers: the other may still be booting, from the
        # last good pair the server holds (tests/server/test_worker_boot.py).
        (live / "tls.key").rename(live / "tls.key.away")
        _, body = wait_for(lambda: (s := server.get("/readyz"))[0] == 503 and s, what="/readyz 503")
        assert "tls.key" in orjson.loads(body)["problems"][0]
        (live / "tls.key.away").rename(live / "tls.key")
        wait_for(lambda: server.get("/readyz")[0] == 200, what="/readyz 200 again")


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def private_dir(tmp_path):
    """The server's own directory, as the master makes it (mode 0700)."""
    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    return directory


@pytest.fixture
def reloader(tmp_path, cert_sets):
    live = shutil.copytree(cert_sets[0], tmp_path / "live")
    clock, seen = FakeClock(), []
    cache = CertificateReloader(
        live / "tls.crt",
        live / "tls.key",
        directory=private_dir(tmp_path),
        clock=clock,
        on_change=seen.append,
    )
    return cache, live, clock, seen


def test_reloader_keeps_one_context_while_contents_stay(reloader):
    cache, live, clock, seen = reloader
    context = cache.context()
    os.utime(live / "tls.crt")  # a new mtime, the same bytes
    clock.now += 5
    assert cache.context() is context and len(seen) == 1 and cache.error is None


def test_reloader_checks_files_at_most_once_per_interval(reloader, cert_sets):
    cache, live, clock, seen = reloader
    context = cache.context()
    install_file_by_file(live, cert_sets[1], "v2")
    clock.now += 0.5
    assert cache.context() is context
    clock.now += 0.5
    assert cache.context() is not context
    assert (
        seen[-1]
        == x509.load_pem_x509_certificate(
            (cert_sets[1] / "tls.crt").read_bytes()
        ).not_valid_after_utc
    )
    assert cache.not_after == seen[-1] and seen[0] > seen[-1]


@pytest.mark.parametrize(
    "break_files",
    [
        lambda live, other: shutil.copy(other / "tls.key", live / "tls.key"),  # key of another pair
        lambda live, other: (live / "tls.crt").write_text("not a certificate"),
        lambda live, other: (live / "tls.key").unlink(),
    ],
    ids=["mismatched-pair", "garbage-certificate", "missing-key"],
)
def test_reloader_keeps_serving_the_last_good_pair(reloader, cert_sets, break_files):
    cache, live, clock, seen = reloader
    context = cache.context()
    break_files(live, cert_sets[1])
    clock.now += 1
    assert cache.context() is context
    assert cache.error and "cannot load TLS certificate" in cache.error
    install_file_by_file(live, cert_sets[1], "v2")
    clock.now += 1
    assert cache.context() is not context and cache.error is None and len(seen) == 2


def test_resume_serves_the_newest_pair_any_process_loaded(reloader, cert_sets):
    # `cache` plays the master, whose pair a new worker is forked with; `sibling` a worker
    # that loaded the rotated pair since. Then the key goes, and a worker starts.
    cache, live, _, seen = reloader
    install_file_by_file(live, cert_sets[1], "v2")
    sibling = CertificateReloader(live / "tls.crt", live / "tls.key", directory=cache.directory)
    (live / "tls.key").unlink()
    cache.resume()
    assert cache.not_after == sibling.not_after != seen[0]
    assert cache.last_good.stat().st_mode & 0o777 == 0o600
    cache.context()  # the files are checked on the first connection, whatever the interval
    assert cache.error and "tls.key" in cache.error and cache.not_after == sibling.not_after


def test_resume_without_the_copy_keeps_the_pair_it_was_forked_with(reloader):
    cache, _, _, seen = reloader
    cache.last_good.unlink()
    cache.resume()
    assert cache.not_after == seen[0] and cache.context() and cache.error is None


def test_reloader_refuses_an_unusable_pair_at_start(tmp_path, cert_sets):
    directory = private_dir(tmp_path)
    with pytest.raises(ssl.SSLError):
        CertificateReloader(cert_sets[0] / "tls.crt", cert_sets[1] / "tls.key", directory=directory)
    with pytest.raises(FileNotFoundError):
        CertificateReloader(tmp_path / "tls.crt", tmp_path / "tls.key", directory=directory)
    assert list(directory.iterdir()) == []  # no last good copy of an unusable pair


def test_context_refuses_tls_below_1_2(reloader):
    assert reloader[0].context().minimum_version == ssl.TLSVersion.TLSv1_2
