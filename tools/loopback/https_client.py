"""The client side of the server tests: HTTPS to loopback as the apiserver dials a webhook.

A verifying TLS context that trusts only the given CA (the webhook's caBundle), a kept-alive
connection that sends the Service's name as SNI, and hand-written HTTP/1.1 requests for the
edge cases `http.client` will not send.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from pathlib import Path
from typing import Any

import orjson

SERVICE, NAMESPACE = "lwgpu-webhook", "lwgpu-system"
# The name the apiserver dials for a Service-backed webhook, and so the SNI it sends.
SNI = f"{SERVICE}.{NAMESPACE}.svc"
JSON = "Content-Type: application/json"


def client_context(*ca_files: Path, client_cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """A verifying client context trusting only ``ca_files``, like the apiserver with a caBundle;
    ``client_cert`` (certificate, key) is presented when the server asks for one."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.load_verify_locations(cadata="".join(Path(f).read_text() for f in ca_files))
    if client_cert is not None:
        context.load_cert_chain(*client_cert)
    return context


class Connection(http.client.HTTPSConnection):
    """An HTTPS connection to a loopback port that sends (and verifies) another host name."""

    def __init__(
        self, port: int, context: ssl.SSLContext, server_hostname: str = SNI, timeout: float = 10
    ) -> None:
        super().__init__("127.0.0.1", port, context=context, timeout=timeout)
        self.context, self.server_hostname = context, server_hostname

    def connect(self) -> None:
        """TCP to 127.0.0.1, TLS with SNI and hostname check against ``server_hostname``."""
        raw = socket.create_connection((self.host, self.port), self.timeout)
        # http.client sends headers and body in two writes; with Nagle on, the second waits
        # for the server's delayed ACK (~44 ms a kept-alive request). Go's client, the
        # apiserver's, sets TCP_NODELAY too.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self.context.wrap_socket(raw, server_hostname=self.server_hostname)

    def call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request on this (possibly kept-alive) connection: status, headers, body."""
        self.request(method, path, body=body, headers=headers or {})
        response = self.getresponse()
        return response.status, response.headers, response.read()

    def review(self, endpoint: str, review: dict[str, Any]) -> tuple[int, Any]:
        """POST an AdmissionReview to ``/mutate`` or ``/validate``; status and parsed body."""
        status, _, data = self.call(
            "POST", f"/{endpoint}", orjson.dumps(review), {"Content-Type": "application/json"}
        )
        return status, orjson.loads(data)


def raw_request(method: str, path: str, headers: list[str], body: bytes = b"") -> bytes:
    """The bytes of an HTTP/1.1 request with exactly these header lines and body."""
    head = [f"{method} {path} HTTP/1.1", "Host: lwgpu-webhook", *headers, "", ""]
    return "\r\n".join(head).encode() + body


class Response(http.client.HTTPResponse):
    """An HTTP response whose body has been read into ``data``."""

    data: bytes


def read_response(sock: ssl.SSLSocket) -> Response:
    """Parse the HTTP response waiting on ``sock``; the body is read into ``.data``."""
    response = Response(sock)
    response.begin()
    response.data = response.read()
    return response
