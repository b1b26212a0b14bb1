"""`python -m webhook serve` on the command line: flag errors, the development certificate."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from tests.support.paths import REPO
from tools.loopback.server import make_certs, start
from tools.waiting import wait_for
from webhook.cli import main, serve

POLICY = REPO / "policies" / "default.yaml"
# Runs the real command line with the development folder moved out of the repository.
REDIRECTED = (
    "import sys; from pathlib import Path; import webhook.cli.serve as c; "
    "c.DEV_CERTS = Path(sys.argv.pop(1)); from webhook.cli import main; sys.exit(main())"
)

CLIENT_CA_ERROR = "cannot load TLS certificate {a}/tls.crt / key {a}/tls.key / client CA "


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pairs")
    return make_certs(root / "a"), make_certs(root / "b")


@pytest.mark.parametrize(
    "flags,message",
    [
        (
            ["--tls-dir", "{a}", "--tls-cert", "{a}/tls.crt"],
            "--tls-dir cannot be combined with --tls-cert/--tls-key",
        ),
        (["--tls-cert", "{a}/tls.crt"], "--tls-cert and --tls-key must be given together"),
        (["--tls-key", "{a}/tls.key"], "--tls-cert and --tls-key must be given together"),
        (
            ["--tls-dir", "{empty}"],
            "--tls-dir {empty}/tls.crt: cannot read: no such file or directory",
        ),
        (
            ["--tls-cert", "{a}/tls.crt", "--tls-key", "{empty}/missing.key"],
            "--tls-key {empty}/missing.key: cannot read: no such file or directory",
        ),
        (
            ["--tls-cert", "{a}/tls.crt", "--tls-key", "{b}/tls.key"],
            "cannot load TLS certificate {a}/tls.crt / key {b}/tls.key: key values mismatch",
        ),
        (
            ["--tls-cert", "{a}/tls.crt", "--tls-key", "{a}/ca.crt"],
            "cannot load TLS certificate {a}/tls.crt / key {a}/ca.crt: not a PEM certificate "
            "chain and its private key",
        ),
        (
            ["--tls-dir", "{a}", "--client-ca", "{empty}/missing.crt"],
            "--client-ca {empty}/missing.crt: cannot read: no such file or directory",
        ),
        (
            ["--tls-dir", "{a}", "--client-ca", "{empty}"],
            "--client-ca {empty}: cannot read: is a directory",
        ),
        (
            ["--tls-dir", "{a}", "--client-ca", "{a}/tls.key"],
            CLIENT_CA_ERROR + "{a}/tls.key: no certificate or crl found",
        ),
    ],
)
def test_unusable_tls_flags_exit_2(pairs, tmp_path, capsys, flags, message):
    names = {"a": pairs[0], "b": pairs[1], "empty": tmp_path}
    assert main(["serve", *(f.format(**names) for f in flags)]) == 2
    err = capsys.readouterr().err
    assert f"python -m webhook serve: error: {message.format(**names)}" in err
    assert "Errno" not in err and "[SSL" not in err  # the OS's and OpenSSL's words in prose


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--port", "0"], "must be a TCP port (1-65535), got 0"),
        (["--port", "70000"], "must be a TCP port (1-65535), got 70000"),
        (["--workers", "0"], "must be at least 1, got 0"),
        (["--threads", "-2"], "must be at least 1, got -2"),
        (["--header-timeout", "0"], "must be more than 0 and at most 30 seconds, got 0"),
        (["--body-timeout", "31"], "must be more than 0 and at most 30 seconds, got 31"),
    ],
)
def test_bad_numbers_are_usage_errors(capsys, flags, message):
    with pytest.raises(SystemExit) as exited:
        main(["serve", *flags])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_defaults_match_the_spec():
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args([])
    assert (args.host, args.port, args.workers, args.threads) == ("127.0.0.1", 8443, 2, 8)
    # The shipped policy, read through the package data link (webhook/defaults -> policies/).
    assert args.policies.resolve() == (REPO / "policies" / "default.yaml").resolve()
    assert Path(".dev-certs") == serve.DEV_CERTS  # beside where `serve` runs, as `make run` does


def test_development_certificate_is_created_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(serve, "DEV_CERTS", tmp_path / "dev")
    certfile, keyfile = serve.development_pair(9443)
    first = certfile.read_bytes()
    sans = (
        x509.load_pem_x509_certificate(first)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert {"localhost", "lwgpu-webhook.lwgpu-system.svc"} <= set(
        sans.get_values_for_type(x509.DNSName)
    )
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert "https://localhost:9443/healthz" in capsys.readouterr().err
    serve.development_pair(9443)
    assert certfile.read_bytes() == first and keyfile.exists()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_serve_without_tls_flags_answers_the_printed_curls(tmp_path):
    """The two hints `make run` prints work as printed: /healthz, and the example
    AdmissionReview of a GPU-memory Pod sent to /mutate, answered with the rewrite."""
    dev = tmp_path / "dev-certs"
    server = start(
        tmp_path,
        POLICY,
        None,
        launcher=(sys.executable, "-c", REDIRECTED, str(dev)),
        ca=dev / "ca.crt",
    )
    try:
        hints = wait_for(
            lambda: re.findall(r"(?:try|and): (curl .*)", server.stderr.read_text()),
            what="the curl hints",
        )
        commands = [shlex.split(hint) for hint in hints]
        answers = [
            subprocess.run(
                command, cwd=REPO, capture_output=True, text=True, timeout=30, check=False
            )
            for command in commands
        ]
    finally:
        server.stop()
    ca, base = str(dev / "ca.crt"), f"https://localhost:{server.port}"
    assert commands == [
        ["curl", "--cacert", ca, f"{base}/healthz"],
        [
            "curl", "--cacert", ca, "-H", "Content-Type: application/json",
            "--data", "@examples/admission-review.json", f"{base}/mutate",
        ],
    ]  # fmt: skip
    assert [answer.returncode for answer in answers] == [0, 0], [a.stderr for a in answers]
    assert answers[0].stdout == '{"status":"ok"}'
    response = json.loads(answers[1].stdout)["response"]
    assert response["allowed"] and response["patchType"] == "JSONPatch"
    assert "GRID-P4-2Q" in " ".join(response["warnings"])


@pytest.mark.parametrize("reuse_port", [True, False], ids=["a gunicorn worker", "any listener"])
def test_serve_refuses_a_port_in_use(pairs, capsys, reuse_port):
    # A listener with SO_REUSEPORT is what a running `serve` holds: without the probe, a
    # second server would bind beside it and the kernel would split the connections.
    with socket.socket() as taken:
        if reuse_port:
            taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--tls-dir", str(pairs[0])]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"python -m webhook serve: error: port {port} on 127.0.0.1 is already in use by another "
        "process; stop it or choose another --port\n"
    )


def test_serve_flags_reach_the_read_limits():
    parser = argparse.ArgumentParser()
    serve.configure(parser)
    args = parser.parse_args(["--handshake-timeout", "1.5", "--body-timeout", "2"])
    assert (args.handshake_timeout, args.header_timeout, args.body_timeout) == (1.5, 3.0, 2.0)
