"""`lwgpu serve`: the HTTPS admission server's command line.

Kept free of gunicorn, Flask and prometheus-client imports until the command runs: the
metrics directory must exist before ``prometheus_client`` is imported, and `completion`,
which configures every command, should not pay for the server's imports.
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from pathlib import Path

from webhook.files import unreadable
from webhook.server.limits import KEEPALIVE_SECONDS, Limits

from .conventions import EXIT_OK, UsageError
from .options import add_policies

DEV_CERTS = Path(".dev-certs")  # in the directory `serve` runs in (git-ignored in the checkout)
# A GPU-memory Pod's AdmissionReview as kube-apiserver sends it, in the checkout: the hint's
# second curl sends it to /mutate.
EXAMPLE_REVIEW = Path("examples/admission-review.json")
DEV_SERVICE = "lwgpu-webhook"
DEV_NAMESPACE = "lwgpu-system"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port (1-65535), got {value}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if not 0 < value <= 30:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 30 seconds, got {text}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` flags."""
    parser.description = (
        "Serve /mutate, /validate, /healthz, /readyz and /metrics over HTTPS. "
        "Without --tls-* flags a development CA and certificate for localhost are "
        f"created in {DEV_CERTS}. The policies are reloaded when --policies changes."
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default %(default)s)"
    )
    parser.add_argument("--port", type=_port, default=8443, help="TCP port (default %(default)s)")
    add_policies(parser)
    parser.add_argument("--tls-cert", type=Path, metavar="FILE", help="PEM certificate (chain)")
    parser.add_argument("--tls-key", type=Path, metavar="FILE", help="PEM private key")
    parser.add_argument(
        "--tls-dir",
        type=Path,
        metavar="DIR",
        help="directory holding tls.crt and tls.key (a kubernetes.io/tls Secret volume)",
    )
    parser.add_argument(
        "--client-ca",
        type=Path,
        metavar="FILE",
        help="PEM CA bundle: /mutate and /validate answer 403 unless the client presents a "
        "certificate it signed (the apiserver's, from its AdmissionConfiguration "
        "kubeConfigFile); /healthz, /readyz and /metrics stay open; reloaded when it changes",
    )
    parser.add_argument(
        "--workers", type=_positive, default=2, help="worker processes (default %(default)s)"
    )
    parser.add_argument(
        "--threads", type=_positive, default=8, help="threads per worker (default %(default)s)"
    )
    # The apiserver gives a webhook call timeoutSeconds (default 10, at most 30) in all: a
    # review must be read, decided and answered inside it. These bound each read, so a client
    # that is slow or silent on purpose holds a connection for seconds and never a thread.
    reads = parser.add_argument_group(
        "read deadlines",
        "Each phase of reading a request has its own deadline, in seconds (more than 0, at "
        "most 30). The apiserver allows a webhook call timeoutSeconds in all (deploy/ sets 5; "
        "at most 30), so a request slower than that has failed for the apiserver already: "
        "no deadline needs to exceed it. A client past a deadline is disconnected, with a 408 "
        "when its request had begun. A connection with no request started (kept alive between "
        "requests, or silent since its TLS handshake) waits up to "
        f"{KEEPALIVE_SECONDS} s without holding a thread: longer than the apiserver's 90 s "
        "idle timeout, so the apiserver always closes an idle connection first.",
    )
    for flag, default, what in (
        ("--handshake-timeout", Limits.handshake, "TLS handshake"),
        ("--header-timeout", Limits.head, "request line and headers, from their first byte"),
        ("--body-timeout", Limits.body, "request body, after the headers"),
    ):
        reads.add_argument(
            flag, type=_seconds, default=default, metavar="S", help=f"{what} (default %(default)s)"
        )
    parser.set_defaults(func=run)


def tls_files(args: argparse.Namespace) -> tuple[Path, Path]:
    """The certificate and key to serve; the development pair when no TLS flag was given."""
    pair = (args.tls_cert, args.tls_key)
    if args.tls_dir is not None:
        if any(pair):
            raise UsageError("--tls-dir cannot be combined with --tls-cert/--tls-key")
        return args.tls_dir / "tls.crt", args.tls_dir / "tls.key"
    if any(pair) and not all(pair):
        raise UsageError("--tls-cert and --tls-key must be given together")
    if all(pair):
        return pair
    return development_pair(args.port)


def development_pair(port: int) -> tuple[Path, Path]:
    """Create (or keep, while valid) the development CA and certificate in ``DEV_CERTS``."""
    import certs

    try:
        certs.generate(
            DEV_CERTS, DEV_SERVICE, DEV_NAMESPACE, dns=("localhost",), ips=("127.0.0.1",)
        )
    except (certs.CertError, OSError) as exc:
        raise UsageError(
            f"cannot create the development certificate in {DEV_CERTS}: {exc}"
        ) from None
    ca = DEV_CERTS / "ca.crt"
    hint = [
        f"webhook serve: no --tls-* flags, serving the development certificate from {DEV_CERTS}",
        f"  try: curl --cacert {_shown(ca)} https://localhost:{port}/healthz",
    ]
    if EXAMPLE_REVIEW.is_file():
        hint.append(
            f"  and: curl --cacert {_shown(ca)} -H 'Content-Type: application/json'"
            f" --data @{_shown(EXAMPLE_REVIEW)} https://localhost:{port}/mutate"
        )
    print("\n".join(hint), file=sys.stderr)
    return DEV_CERTS / "tls.crt", DEV_CERTS / "tls.key"


def _shown(path: Path) -> str:
    # Relative when run from the repository (the usual case), so the hint is short.
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def _readable(flag: str, path: Path) -> None:
    # Checked before the server loads it, so the message names the flag and the OS's reason
    # in words ("no such file or directory"), not `[Errno 2]`.
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise UsageError(unreadable(f"{flag} {path}", exc)) from None


def _why(exc: Exception) -> str:
    # OpenSSL's reason code in words ("key values mismatch"), not "[SSL: KEY_VALUES_MISMATCH]";
    # a file that is no PEM at all gives no reason, only "[SSL] PEM lib (_ssl.c:NNNN)".
    if isinstance(exc, ssl.SSLError):
        if exc.reason:
            return str(exc.reason).lower().replace("_", " ")
        return "not a PEM certificate chain and its private key"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc)


def run(args: argparse.Namespace) -> int:
    """Start gunicorn in this process; return when it has shut down (`UsageError` on bad
    usage)."""
    from webhook.server.master import PortInUse, ServeSettings, WebhookApplication

    certfile, keyfile = tls_files(args)
    named = args.tls_cert is not None
    _readable("--tls-cert" if named else "--tls-dir", certfile)
    _readable("--tls-key" if named else "--tls-dir", keyfile)
    if args.client_ca is not None:
        _readable("--client-ca", args.client_ca)
    settings = ServeSettings(
        args.host,
        args.port,
        args.policies,
        certfile,
        keyfile,
        args.workers,
        args.threads,
        args.client_ca,
        Limits(args.handshake_timeout, args.header_timeout, args.body_timeout),
    )
    try:
        application = WebhookApplication(settings)
    except PortInUse as exc:
        raise UsageError(str(exc)) from None
    except (OSError, ssl.SSLError, ValueError) as exc:
        ca = "" if args.client_ca is None else f" / client CA {args.client_ca}"
        raise UsageError(
            f"cannot load TLS certificate {certfile} / key {keyfile}{ca}: {_why(exc)}"
        ) from None
    application.run()
    return EXIT_OK
