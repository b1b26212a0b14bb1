"""`lwgpu certs generate|check|install|rotate`, which is also `python -m certs ...` (the
certificate Job and CronJob run that): the arguments of the `certs` package's functions, and
their results printed.

Exit codes: 0 done (or nothing to do), 1 `check` found something to renew, or `rotate` left a
renewal only `install` can make (a CA due), 2 bad input or usage, with one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from cryptography import x509

from certs.authority import BACKDATE, CA_DAYS, KEY_TYPES, SERVING_DAYS, Spec
from certs.directory import check, generate
from certs.errors import CertError
from certs.rotation import not_after_text
from certs.store import load_dir

from .conventions import EXIT_FOUND, EXIT_OK, UsageError, run
from .options import add_kubeconfig

if TYPE_CHECKING:
    # Types only: the kubernetes client takes about a second to import (see `_install`).
    from kubernetes.client import ApiClient

    from certs.stored import Places


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m certs ...`: this command as a program of its own."""
    parser = argparse.ArgumentParser(prog="python -m certs")
    configure(parser)
    return run(parser, argv)


def _refusing(action: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`action`, with the certificate tool's one-line refusal (`CertError`) a usage error."""

    def refusing(args: argparse.Namespace) -> int:
        try:
            return action(args)
        except CertError as exc:
            raise UsageError(exc) from None

    return refusing


def _generate(args: argparse.Namespace) -> int:
    written = generate(
        args.out,
        args.service,
        args.namespace,
        days=args.days,
        ca_days=args.ca_days,
        dns=args.dns,
        ips=args.ip,
        key_type=args.key_type,
        force=args.force,
    )
    state = (
        "wrote ca.crt, ca.key, tls.crt, tls.key"
        if written
        else "valid certificate set left unchanged"
    )
    print(f"certs: {args.out}: {state}", file=sys.stderr)
    # stdout carries only the caBundle so that `CA_BUNDLE=$(python -m certs generate ...)` works.
    cert_set = load_dir(args.out)
    if cert_set is None:
        # generate() left a set there; only something else deleting it since gets here.
        raise UsageError(f"{args.out}: the certificate set was removed right after it was written")
    if written:
        _warn_if_cut(cert_set.cert, args.days)
    print(cert_set.ca_bundle_b64())
    return EXIT_OK


def _warn_if_cut(cert: x509.Certificate, days: int) -> None:
    # A serving certificate never outlives its CA (authority.issue_serving cuts it): say so,
    # rather than let a 5000-day request quietly become the CA's remaining lifetime.
    issued = cert.not_valid_before_utc + BACKDATE
    if cert.not_valid_after_utc >= issued + timedelta(days=days):
        return
    print(
        f"certs: warning: --days {days}: the serving certificate expires "
        f"{not_after_text(cert)} ({(cert.not_valid_after_utc - issued).days} days), when its CA "
        f"does, as a certificate cannot outlive the CA that signs it; for {days} days give "
        f"--ca-days {days} or more (an existing CA is replaced only with --force, which "
        "changes the caBundle)",
        file=sys.stderr,
    )


def _check(args: argparse.Namespace) -> int:
    lines, the_plan = check(args.dir)
    for line in lines:
        print(line)
    for reason in the_plan.reasons:
        print(f"renew: {reason}")
    if not the_plan.needed:
        print("nothing to renew")
    return EXIT_FOUND if the_plan.needed else EXIT_OK


def _install(args: argparse.Namespace) -> int:
    # Imported here: the kubernetes client takes about a second to import, and `generate`
    # and `check` (run at every server start in development) never need it.
    from certs.install import install

    spec = Spec(args.service, args.namespace, args.days, args.ca_days, key_type=args.key_type)
    places = _places(args)
    with _client(args) as client:
        result = install(client, spec, places, args.webhook_config)
    print(f"Secret {args.namespace}/{args.secret}: {result.secret}")
    print(f"Secret {args.namespace}/{args.ca_secret}: {result.ca_secret}")
    if places.bundle is not None:
        print(f"ConfigMap {args.namespace}/{places.bundle}: {result.bundle}")
    for target in result.patched:
        print(f"{target}: caBundle patched")
    if not result.wrote:
        print("nothing to change")
    return EXIT_OK


def _rotate(args: argparse.Namespace) -> int:
    from certs.rotate import rotate

    spec = Spec(args.service, args.namespace, args.days, key_type=args.key_type)
    with _client(args) as client:
        result = rotate(client, spec, _places(args))
    print(f"Secret {args.namespace}/{args.secret}: {result.secret}")
    for reason in result.left:
        print(f"left to `certs install`: {reason}")
    return EXIT_FOUND if result.left else EXIT_OK


def _places(args: argparse.Namespace) -> Places:
    from certs.stored import Places

    bundle = getattr(args, "ca_configmap", None)
    return Places(args.namespace, args.secret, args.ca_secret, bundle)


def _client(args: argparse.Namespace) -> ApiClient:
    from webhook.kube.client import KubeConfigError, api_client

    try:
        return api_client(args.kubeconfig, args.context)
    except KubeConfigError as exc:
        raise UsageError(exc) from None


def _add_issue_flags(parser: argparse.ArgumentParser, *, ca: bool = True) -> None:
    parser.add_argument("--service", required=True, help="Service name of the webhook")
    parser.add_argument("--namespace", required=True, help="namespace of the Service")
    parser.add_argument(
        "--days",
        type=int,
        default=SERVING_DAYS,
        help=f"serving certificate lifetime (default {SERVING_DAYS}); never past the CA's "
        "expiry: a longer one is cut to it (generate warns), so raise --ca-days with it",
    )
    if ca:
        parser.add_argument(
            "--ca-days", type=int, default=CA_DAYS, help=f"CA lifetime (default {CA_DAYS})"
        )
    parser.add_argument("--key-type", choices=KEY_TYPES, default="ecdsa-p256")


def _add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--secret",
        required=True,
        help="kubernetes.io/tls Secret (in --namespace) with tls.crt and tls.key, the one the "
        "webhook mounts",
    )
    parser.add_argument(
        "--ca-secret",
        default="lwgpu-ca",
        help="Opaque Secret (in --namespace) with the CA: ca.crt and ca.key (default lwgpu-ca)",
    )
    add_kubeconfig(parser)


def configure(parser: argparse.ArgumentParser) -> None:
    """The `generate`, `check` and `install` sub-commands and their flags."""
    parser.description = "Certificates for the lwgpu webhook: generate, check, install, rotate."
    commands = parser.add_subparsers(dest="command", required=True)

    gen = commands.add_parser(
        "generate", help="create or renew a CA and serving certificate in a directory"
    )
    _add_issue_flags(gen)
    gen.add_argument("--out", required=True, help="directory for ca.crt, ca.key, tls.crt, tls.key")
    gen.add_argument("--dns", action="append", default=[], help="extra DNS SAN (repeatable)")
    gen.add_argument("--ip", action="append", default=[], help="extra IP SAN (repeatable)")
    gen.add_argument(
        "--force", action="store_true", help="start over with a new CA even if the set is valid"
    )
    gen.set_defaults(func=_refusing(_generate))

    chk = commands.add_parser(
        "check", help="print expiry and what would be renewed (exit 1 if anything)"
    )
    chk.add_argument("dir", help="directory holding ca.crt, ca.key, tls.crt, tls.key")
    chk.set_defaults(func=_refusing(_check))

    ins = commands.add_parser(
        "install", help="create or rotate the Secrets and patch caBundle into webhook configs"
    )
    _add_issue_flags(ins)
    _add_cluster_flags(ins)
    ins.add_argument(
        "--ca-configmap",
        metavar="NAME",
        help="ConfigMap (in --namespace) to hold the CA bundle as ca.crt, for clients that "
        "verify the webhook, such as Prometheus (default: none)",
    )
    ins.add_argument(
        "--webhook-config",
        action="extend",
        nargs="+",
        required=True,
        metavar="NAME",
        help="Mutating/ValidatingWebhookConfiguration to patch (repeatable, or several names)",
    )
    ins.set_defaults(func=_refusing(_install))

    rot = commands.add_parser(
        "rotate",
        help="re-issue the serving certificate under the installed CA when due (exit 1 if the "
        "CA needs `install`); touches no webhook configuration",
    )
    _add_issue_flags(rot, ca=False)
    _add_cluster_flags(rot)
    rot.set_defaults(func=_refusing(_rotate))
