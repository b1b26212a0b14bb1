"""gunicorn embedded: the master process, its settings and the hooks that tie workers together.

This module runs in the master, before any worker exists. It must not import
``prometheus_client`` (nor ``.app.wsgi``/``.app.metrics``): the master only prepares the
multiprocess directory and removes dead workers' files; every metric value belongs to a
worker. The Flask app, the policy poller and the metrics are created in each worker by
``load()`` after the fork.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

from .app.metrics_dir import prepare_metrics_dir
from .limits import KEEPALIVE_SECONDS, MAX_BODY_BYTES, Limits
from .state.tls import CertificateReloader
from .transport.worker import WebhookWorker

if TYPE_CHECKING:
    from flask import Flask

# A webhook call may last at most 30 s (timeoutSeconds' maximum): in-flight reviews get
# that long to finish after SIGTERM. The Pod's terminationGracePeriodSeconds must exceed it.
GRACEFUL_TIMEOUT_SECONDS = 30
# gunicorn's `timeout`: the master kills a worker whose event loop has not beaten its
# heartbeat for this long, and forks another. A hung worker's SO_REUSEPORT listener keeps
# taking its share of new connections, which then wait for nothing; at gunicorn's default,
# 30 s, that failed half the reviews for 31 s (docs/RELIABILITY.md, hung worker), six times
# the apiserver's 5 s. The loop beats at least once a second whatever its threads review,
# and a worker must boot within it (import, policy load: ~2 s at a load average of 9 on 2
# cores), hence 10.
WORKER_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class ServeSettings:
    """What ``webhook serve`` was asked for, resolved to files."""

    host: str
    port: int
    policies: Path
    certfile: Path
    keyfile: Path
    workers: int = 2
    threads: int = 8
    client_ca: Path | None = None
    limits: Limits = field(default_factory=Limits)
    # Requests with a body over 256 KiB that one worker holds at once (see BodyBudget):
    # what bounds its memory under concurrent maximum-size reviews.
    body_permits: int = 1


class PortInUse(Exception):
    """The address to serve on is taken, or cannot be listened on."""


def check_port_free(host: str, port: int) -> None:
    """Raise ``PortInUse`` when another process listens on the port (or it cannot be had).

    Each worker binds its own ``SO_REUSEPORT`` listener, so a second server on the same port
    would start without error and the kernel would split the connections between two
    servers that may run different policies. A probe bound without ``SO_REUSEPORT`` fails
    while any socket listens there (Linux admits a shared port only when every socket sets
    the option); ``SO_REUSEADDR`` lets it pass connections in TIME_WAIT from an earlier run.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise PortInUse(f"cannot listen on {host!r}: {exc.strerror}") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(
                    f"port {port} on {host} is already in use by another process; stop it "
                    f"or choose another --port"
                ) from None
            raise PortInUse(f"cannot listen on {host}:{port}: {exc.strerror}") from None


# glibc's mallopt(M_ARENA_MAX): malloc.h. Each thread that contends for malloc gets an arena
# of its own, up to 8 per core, and memory freed in one is not given back while any of its
# pages is in use: after concurrent 7 MiB reviews a worker kept ~60 MiB more with 8 arenas
# than with 2 (docs/RELIABILITY.md). The reviews hold the GIL anyway, so 2 arenas cost no
# throughput. Set in the master, before any thread exists; forked workers inherit it.
M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def limit_malloc_arenas() -> bool:
    """Cap glibc's malloc arenas (True when set; False on a C library without the option)."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS))
    except (OSError, AttributeError):
        return False


# gunicorn ships no type information: the hooks' arguments are its worker, request and
# arbiter objects, typed Any where an attribute is read and object where none is.
def _close_oversized(worker: object, req: Any) -> None:
    # pre_request hook (worker). The app answers 413 without reading the body; this makes
    # gunicorn close the connection afterwards instead of draining megabytes to keep it.
    for name, value in req.headers:
        if name == "CONTENT-LENGTH" and value.isdigit() and int(value) > MAX_BODY_BYTES:
            req.force_close()


def _worker_exited(server: object, worker: Any) -> None:
    # child_exit hook (master): drop the dead worker's live gauges so they stop counting.
    from prometheus_client import multiprocess

    # prometheus_client ships py.typed but leaves this function unannotated.
    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def _log_to_stderr() -> None:
    # Policy reloads and certificate swaps are operational events: stderr, next to
    # gunicorn's own log, while stdout carries only the per-review JSON lines.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s")
    )
    package = logging.getLogger("webhook")
    package.addHandler(handler)
    package.setLevel(logging.INFO)


def _without_empty_listeners(record: logging.LogRecord) -> bool:
    # With reuse_port the master binds nothing (each worker binds its own listener), so
    # gunicorn's Arbiter.start logs "Listening at:  (PID)" with no address; `_announce` logs the
    # address instead.
    empty = isinstance(record.args, tuple) and record.args[:1] == ("",)
    return not (record.msg == "Listening at: %s (%s)" and empty)


class WebhookApplication(BaseApplication):  # type: ignore[misc]  # gunicorn has no types: base is Any
    """gunicorn configured from ``ServeSettings``: gthread workers, TLS from a reloading cache."""

    def __init__(self, settings: ServeSettings) -> None:
        """Load the certificate and probe the port now: either failing stops ``serve`` early."""
        self.settings = settings
        # The server's own directory (mode 0700) for the last good TLS pair (state/tls.py).
        self.private_dir = tempfile.mkdtemp(prefix="lwgpu-tls-")
        try:
            self.certificates = CertificateReloader(
                settings.certfile,
                settings.keyfile,
                directory=self.private_dir,
                client_ca=settings.client_ca,
            )
            check_port_free(settings.host, settings.port)
        except BaseException:
            shutil.rmtree(self.private_dir)
            raise
        # In the master, so that the workers it forks log from their first line on.
        _log_to_stderr()
        limit_malloc_arenas()
        self.metrics_dir, self._own_metrics_dir = prepare_metrics_dir()
        logging.getLogger("gunicorn.error").addFilter(_without_empty_listeners)
        super().__init__()

    def load_config(self) -> None:
        """Settings that are not a matter of taste are fixed here, with the reason next to them."""
        s = self.settings
        reloader = self.certificates
        config = {
            "bind": [f"[{s.host}]:{s.port}" if ":" in s.host else f"{s.host}:{s.port}"],
            # The apiserver keeps HTTP/1.1 connections alive; sync workers serve one connection
            # at a time and close it, gthread keeps them in a poller without holding a thread,
            # and WebhookWorker reads every request there too, under deadlines.
            "worker_class": WebhookWorker,
            # Connections a worker holds, reading or idle (gthread's default, made explicit:
            # the attack suite holds 256 per kind against 2 workers).
            "worker_connections": 1000,
            "workers": s.workers,
            "threads": s.threads,
            # Each worker gets its own SO_REUSEPORT listener and the kernel spreads connections;
            # with one shared socket, one gthread worker often accepted every keep-alive
            # connection while the other idled (docs/PERFORMANCE.md: 0.50x -> 0.83x of the no-op).
            "reuse_port": True,
            "keepalive": KEEPALIVE_SECONDS,
            "graceful_timeout": GRACEFUL_TIMEOUT_SECONDS,
            "timeout": WORKER_TIMEOUT_SECONDS,
            # gunicorn turns TLS on when `certfile` is set, and never reads it: the context comes
            # from the `ssl_context` hook. With reuse_port it does check, in each worker it forks
            # and before post_fork, that the file exists (arbiter.spawn_worker ->
            # sock.create_sockets); a worker failing that exits with WORKER_BOOT_ERROR, and the
            # arbiter halts the whole server, healthy workers included (arbiter.reap_workers).
            # No hook can catch that, and checking the files in pre_fork would still race with
            # a rotation. So gunicorn is given the last good copy, which exists from start to
            # exit and is only ever replaced by a rename, and no `keyfile`, which it would check
            # too: the files being rotated never decide whether a worker boots.
            "certfile": str(reloader.last_good),
            "ssl_context": lambda conf, default_factory: reloader.context(),
            # A new worker serves the newest pair the server loaded, not the master's from start.
            "post_fork": lambda server, worker: reloader.resume(),
            "pre_request": _close_oversized,
            "child_exit": _worker_exited,
            "when_ready": self._announce,
            "on_exit": lambda server: self._remove_directories(),
            # The control socket lives under $HOME, which is read-only in the Pod and shared
            # between servers started by tests; the webhook does not need it.
            "control_socket_disable": True,
            "proc_name": "lwgpu-webhook",
            "errorlog": "-",
            "loglevel": "info",
        }
        for key, value in config.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        """Build the worker's app: policy poller, metrics hooks, Flask (runs after the fork)."""
        from .app import metrics
        from .app.wsgi import create_app
        from .state.discovery import Discovery
        from .state.policy_store import PolicyStore

        discovery = Discovery(report=metrics.discovery_state)

        def loaded(generation: int) -> None:
            metrics.policy_loaded(generation)
            discovery.follow(store.current)

        store = PolicyStore(
            self.settings.policies, on_loaded=loaded, on_failed=metrics.policy_failed
        )
        store.start()
        self.certificates.on_change = metrics.certificate_expires
        metrics.certificate_expires(self.certificates.not_after)
        return create_app(store, self.certificates, discovery)

    def _announce(self, server: Any) -> None:
        # when_ready hook (master). gunicorn's own "Listening at:" line is empty with
        # reuse_port: the master binds nothing, each worker binds its own listener.
        s = self.settings
        host = f"[{s.host}]" if ":" in s.host else s.host
        server.log.info(
            "lwgpu webhook listening at https://%s:%d (%d workers x %d threads)",
            host,
            s.port,
            s.workers,
            s.threads,
        )

    def _remove_directories(self) -> None:
        shutil.rmtree(self.private_dir, ignore_errors=True)
        if self._own_metrics_dir:
            shutil.rmtree(self.metrics_dir, ignore_errors=True)
