"""A delaying TCP proxy in front of kube-apiserver: what a slow or congested network between a
component and the API server looks like to the component (it imitates the network, not
Kubernetes; the apiserver behind it is the real one, TLS end to end through it).

Every chunk of bytes the apiserver sends is held `delay` seconds before it is passed on, so
each response (and each watch event) arrives that much later; `stall()` holds them all until
`resume()`. What the component sends goes through at once. Loopback only; `close()` ends every
connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

CHUNK = 65536


class SlowProxy:
    """Listens on 127.0.0.1 (`port`) and forwards each connection to `upstream` (host, port)."""

    def __init__(self, upstream: tuple[str, int], delay: float = 0.0) -> None:
        self.upstream, self.delay = upstream, delay
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="slow-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        """The apiserver's URL through the proxy (its certificate names 127.0.0.1)."""
        return f"https://127.0.0.1:{self.port}"

    def stall(self) -> None:
        """Hold every answer from now on, as a network that stopped carrying them."""
        self._flowing.clear()

    def resume(self) -> None:
        """Let the held answers go on."""
        self._flowing.set()

    def close(self) -> None:
        """Stop listening and cut every connection."""
        self._closed.set()
        self._flowing.set()
        with self._lock:
            for sock in [self._listener, *self._sockets]:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()  # as a TCP load balancer with no backend: accepted, then closed
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            for source, sink, slow in ((client, server, False), (server, client, True)):
                threading.Thread(target=self._pump, args=(source, sink, slow), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, slow: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(CHUNK):
                if slow:
                    self._flowing.wait()
                    if self.delay:
                        time.sleep(self.delay)
                    self._flowing.wait()
                sink.sendall(data)
        # one side ended: end the other, so the component sees what the apiserver did
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
