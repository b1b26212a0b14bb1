"""``install`` (certs/install.py) and ``python -m certs install`` against the real kube-apiserver
of the session (tests/support/cluster.py).

The Secret lives in a namespace of the test's own, and the caBundles go into webhook
configurations of its own (cluster-scoped, named after that namespace, deleted at the end);
they have no `rules`, so the apiserver never calls them (`ShouldCallHook` in
staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go calls a webhook
only when one of its rules matches). Conflicts are real 409s: a second writer changes the
object between the installer's read and its write (`Update` in
staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go refuses a stale
resourceVersion, and a create of an existing name is AlreadyExists, also 409).
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from kubernetes import client

from certs import CertError, CertSet, Spec, cli
from certs.install import install
from tests.support.certs import handshake, run_certs, tls_server
from tests.support.paths import REPO
from tests.support.server import free_port
from tools.cluster.controlplane import environment

ADM = "admissionregistration.k8s.io/v1"
MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
T0 = datetime(2030, 1, 1, tzinfo=UTC)
SECRET = "lwgpu-tls"
WRITER = "test.lwgpu.io/writer"


def webhook_config(kind: str, name: str, namespace: str, hooks: int = 2) -> dict:
    """A webhook configuration as the deploy manifests create it: no caBundle yet."""
    return {
        "apiVersion": ADM,
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"h{i}.lwgpu.io",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "service": {"name": "lwgpu", "namespace": namespace, "path": "/mutate"}
                },
            }
            for i in range(hooks)
        ],
    }


class Cluster:
    """The test's namespace and webhook configurations, written and read back as the admin."""

    def __init__(self, plane, namespace):
        self.plane, self.ns = plane, namespace.name
        self.name, self.final = f"lwgpu-{self.ns}", f"lwgpu-{self.ns}-final"
        self.targets = [(MUTATING, self.name), (VALIDATING, self.name), (VALIDATING, self.final)]
        self.spec = Spec("lwgpu", self.ns, days=30, ca_days=300)
        admin = plane.api()
        self.core, self.adm = client.CoreV1Api(admin), client.AdmissionregistrationV1Api(admin)

    def _call(self, verb: str, kind: str, *args, **kwargs):
        kind_name = "mutating" if kind == MUTATING else "validating"
        return getattr(self.adm, f"{verb}_{kind_name}_webhook_configuration")(*args, **kwargs)

    def create_configs(self) -> None:
        for kind, name in self.targets:
            hooks = 1 if name == self.final else 2
            self._call("create", kind, webhook_config(kind, name, self.ns, hooks))

    def delete_configs(self) -> None:
        for kind, name in self.targets:
            self._call("delete", kind, name)

    def config(self, kind: str, name: str) -> dict:
        """The configuration as stored, JSON as the apiserver sent it."""
        return json.loads(self._call("read", kind, name, _preload_content=False).data)

    def annotate(self, kind: str, name: str, value: str) -> None:
        """Someone else's write: an annotation, which moves the object's resourceVersion."""
        body = {"metadata": {"annotations": {WRITER: value}}}
        if kind == "Secret":
            self.core.patch_namespaced_secret(name, self.ns, body)
        else:
            self._call("patch", kind, name, body)

    def bundles(self) -> set[str | None]:
        """Every caBundle across the three configurations (None: a webhook without one)."""
        return {
            hook["clientConfig"].get("caBundle")
            for kind, name in self.targets
            for hook in self.config(kind, name)["webhooks"]
        }

    def versions(self) -> list[str]:
        """The resourceVersions of the Secret and the configurations: what any write changes."""
        configs = [self.config(k, n)["metadata"]["resourceVersion"] for k, n in self.targets]
        return [self.secret()["metadata"]["resourceVersion"], *configs]

    def secret(self) -> dict:
        read = self.core.read_namespaced_secret(SECRET, self.ns, _preload_content=False)
        return json.loads(read.data)

    def secret_set(self) -> CertSet:
        secret = self.secret()
        assert secret["type"] == "kubernetes.io/tls"
        files = {k: base64.b64decode(v) for k, v in secret["data"].items()}
        return CertSet.from_files(files, "secret")

    def seed_secret(self, **fields) -> None:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET}, **fields}
        self.core.create_namespaced_secret(self.ns, body)

    def install(self, kube_requests, names=None, **kwargs):
        """`install` as the admin, through a client whose requests `kube_requests` records."""
        api = kube_requests.follow(self.plane.api())
        names = [self.name, self.final] if names is None else names
        return install(api, self.spec, SECRET, names, **kwargs)


@pytest.fixture
def cluster(control_plane, namespace):
    """Three webhook configurations without caBundle, and no Secret yet."""
    made = Cluster(control_plane, namespace)
    made.create_configs()
    yield made
    made.delete_configs()


def interfere(cluster, kube_requests, method: str, path: str, times: int) -> list[int]:
    """Before each of the next `times` requests `method` `path`, another writer annotates the
    object it targets (as the admin); returns the list that counts those writes."""
    done: list[int] = []
    kind, name = (MUTATING, cluster.name) if "webhookconfigurations" in path else ("Secret", SECRET)

    def write(sent) -> None:
        if sent.method == method and re.search(path, sent.path) and len(done) < times:
            done.append(1)
            cluster.annotate(kind, name, str(len(done)))

    kube_requests.before.append(write)
    return done


def test_first_run_creates_then_second_run_writes_nothing(cluster, kube_requests):
    result = cluster.install(kube_requests, now=T0)
    assert result.secret == "created"
    assert result.patched == (
        f"{MUTATING}/{cluster.name}",
        f"{VALIDATING}/{cluster.name}",
        f"{VALIDATING}/{cluster.final}",
    )
    cert_set = cluster.secret_set()
    assert cluster.bundles() == {cert_set.ca_bundle_b64()} == {result.ca_bundle}
    assert [m for m, _ in kube_requests.writes()] == ["PATCH", "PATCH", "PATCH", "POST"], (
        "caBundle before the Secret"
    )
    versions, seen = cluster.versions(), len(kube_requests.sent)
    again = cluster.install(kube_requests, now=T0 + timedelta(days=5))
    assert (again.secret, again.patched, again.wrote) == ("unchanged", (), False)
    assert kube_requests.writes(seen) == [] and len(kube_requests.sent) > seen
    assert cluster.versions() == versions


def test_created_secret_serves_tls_trusted_by_the_ca_bundle(cluster, kube_requests, tmp_path):
    cluster.install(kube_requests, names=[cluster.name])
    secret = cluster.secret()
    for name in ("tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(base64.b64decode(secret["data"][name]))
    # What the apiserver trusts is the caBundle in the configuration, not the Secret's ca.crt.
    hook = cluster.config(MUTATING, cluster.name)["webhooks"][0]
    (tmp_path / "bundle.pem").write_bytes(base64.b64decode(hook["clientConfig"]["caBundle"]))
    with tls_server(tmp_path / "tls.crt", tmp_path / "tls.key") as port:
        assert handshake(port, tmp_path / "bundle.pem", f"lwgpu.{cluster.ns}.svc") == b"ok"


@pytest.mark.parametrize(
    "fraction, expected, ca_count", [(0.5, "unchanged", 1), (0.7, "rotated", 1)]
)
def test_serving_certificate_rotation(cluster, kube_requests, fraction, expected, ca_count):
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    now = first.cert.not_valid_before_utc + fraction * (
        first.cert.not_valid_after_utc - first.cert.not_valid_before_utc
    )
    result = cluster.install(kube_requests, now=now)
    after = cluster.secret_set()
    assert result.secret == expected and len(after.ca_bundle) == ca_count
    assert (after.cert != first.cert) is (expected == "rotated") and after.ca == first.ca


def test_ca_rotation_keeps_old_ca_in_every_bundle(cluster, kube_requests):
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    result = cluster.install(kube_requests, now=T0 + timedelta(days=210))
    after = cluster.secret_set()
    assert result.secret == "rotated" and after.ca_bundle == (after.ca, first.ca)
    assert cluster.bundles() == {after.ca_bundle_b64()}


@pytest.mark.parametrize(
    "method, target, times, calls",
    [
        ("PUT", "secret", 1, 2),
        ("PUT", "secret", 4, 5),
        ("PATCH", "mutating", 2, 3),
    ],
)
def test_conflicts_from_a_concurrent_writer_are_retried(
    cluster, kube_requests, method, target, times, calls
):
    """Each time the installer is about to write, someone else writes first: the apiserver
    answers 409, the installer reads again and writes on top, keeping the other write."""
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    path = (
        rf"/namespaces/{cluster.ns}/secrets/{SECRET}$"
        if target == "secret"
        else rf"/mutatingwebhookconfigurations/{cluster.name}$"
    )
    done = interfere(cluster, kube_requests, method, path, times)
    seen = len(kube_requests.sent)
    result = cluster.install(kube_requests, now=T0 + timedelta(days=210))
    assert len(done) == times
    assert result.secret == "rotated" and cluster.secret_set().ca != first.ca
    sent = [p for m, p in kube_requests.writes(seen) if m == method and re.search(path, p)]
    assert len(sent) == calls
    assert cluster.bundles() == {cluster.secret_set().ca_bundle_b64()}
    other = cluster.secret() if target == "secret" else cluster.config(MUTATING, cluster.name)
    assert other["metadata"]["annotations"][WRITER] == str(times)


def test_endless_conflicts_give_up_and_the_bundle_still_trusts_the_secret(cluster, kube_requests):
    cluster.install(kube_requests, now=T0)
    first = cluster.secret_set()
    interfere(cluster, kube_requests, "PUT", rf"/secrets/{SECRET}$", times=100)
    with pytest.raises(CertError, match="kept changing under us: gave up after 5 conflicts"):
        cluster.install(kube_requests, now=T0 + timedelta(days=210))
    # The bundles were patched first (new CA + old); the Secret kept the old set, whose CA
    # they still hold: the webhook stays reachable.
    assert cluster.secret_set().cert == first.cert
    for bundle in cluster.bundles():
        assert first.ca in x509.load_pem_x509_certificates(base64.b64decode(bundle))


def test_two_installers_racing_for_the_first_secret(cluster, kube_requests):
    """Both read "no Secret", both create one at the same moment: the apiserver keeps one,
    the loser gets AlreadyExists, reads the winner's set and patches its bundle everywhere."""
    both_ready = threading.Barrier(2, timeout=60)

    def hold_create(sent) -> None:
        if sent.method == "POST" and sent.path.endswith(f"/namespaces/{cluster.ns}/secrets"):
            both_ready.wait()

    kube_requests.before.append(hold_create)
    results, errors = [], []

    def run() -> None:
        try:
            results.append(cluster.install(kube_requests, now=T0))
        except Exception as exc:  # reported below, with the other thread's outcome
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert sorted(r.secret for r in results) == ["created", "unchanged"]
    final = cluster.secret_set().ca_bundle_b64()
    assert [r.ca_bundle for r in results] == [final, final]
    assert cluster.bundles() == {final}
    posts = [p for m, p in kube_requests.writes() if m == "POST"]
    assert len(posts) == 2


def test_two_installer_processes_at_once(cluster, control_plane):
    """Two `python -m certs install` at the same time (the Job and a CronJob run, say): both
    exit 0, one created the Secret, and every webhook trusts the CA of the Secret kept."""
    argv = [
        *(sys.executable, "-m", "certs", "install", "--namespace", cluster.ns),
        *("--service", "lwgpu", "--secret", SECRET),
        *("--webhook-config", cluster.name, cluster.final),
    ]
    # KUBECONFIG, as the CLI reads it when no --kubeconfig is given
    env = environment(control_plane)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    procs = [
        subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    firsts = sorted(out.splitlines()[0] for out, _ in outs)
    assert firsts == [
        f"Secret {cluster.ns}/{SECRET}: created",
        f"Secret {cluster.ns}/{SECRET}: unchanged",
    ]
    assert all(err == "" for _, err in outs)
    assert cluster.bundles() == {cluster.secret_set().ca_bundle_b64()}


def test_precreated_empty_secret_is_filled_and_keeps_its_labels(cluster, kube_requests):
    # What a manifest creates so that pods can mount the Secret before the installer ran.
    cluster.seed_secret(
        type="kubernetes.io/tls",
        metadata={"name": SECRET, "labels": {"app": "lwgpu"}},
        data={"tls.crt": "", "tls.key": ""},
    )
    assert cluster.install(kube_requests, names=[cluster.name]).secret == "created"
    assert cluster.secret()["metadata"]["labels"] == {"app": "lwgpu"}
    assert ("PUT", f"/api/v1/namespaces/{cluster.ns}/secrets/{SECRET}") in kube_requests.writes()


# A Secret whose data is not base64 cannot exist: the apiserver decodes `data` as []byte and
# refuses the object (400), so install's "not valid base64" branch has no real case.
@pytest.mark.parametrize(
    "secret, message",
    [
        (None, "exists neither as a MutatingWebhookConfiguration"),
        ({"type": "Opaque", "data": {}}, "has type Opaque, expected kubernetes.io/tls"),
        (
            {
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": base64.b64encode(b"junk").decode(), "tls.key": ""},
            },
            "incomplete",
        ),
    ],
    ids=["missing-config", "opaque", "incomplete"],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(cluster, kube_requests, secret, message):
    if secret is not None:
        cluster.seed_secret(**secret)
    names = [cluster.name, f"{cluster.name}-missing"] if secret is None else [cluster.name]
    with pytest.raises(CertError, match=message):
        cluster.install(kube_requests, names=names)
    assert kube_requests.writes() == [] and cluster.bundles() == {None}


@pytest.mark.parametrize(
    "who, missing, code, out, err",
    [
        ("admin", False, 0, "Secret {ns}/lwgpu-tls: created", ""),
        ("admin", True, 2, "", 'certs: error: webhook configuration "{name}-missing" exists'),
        ("no-rights", False, 2, "", "certs: error: Kubernetes API answered 403 Forbidden: "),
        ("nobody-listening", False, 2, "", "certs: error: cannot reach the Kubernetes API: "),
    ],
)
def test_cli(
    cluster, control_plane, service_accounts, tmp_path, capsys, who, missing, code, out, err
):
    """The command's exit code and its one line for each kind of answer the apiserver (or its
    absence) gives: success, a missing configuration, a ServiceAccount without RBAC (a real
    403), and an address nothing listens on. In-process: the processes are
    test_two_installer_processes_at_once's."""
    if who == "admin":
        kubeconfig = control_plane.kubeconfig
    elif who == "no-rights":
        kubeconfig = service_accounts.create("no-rights")
    else:
        kubeconfig = tmp_path / "dead.kubeconfig"
        kubeconfig.write_text(
            control_plane.kubeconfig.read_text().replace(
                control_plane.server, f"https://127.0.0.1:{free_port()}"
            )
        )
    configs = [cluster.name, cluster.final] + ([f"{cluster.name}-missing"] if missing else [])
    argv = [
        *("install", "--kubeconfig", str(kubeconfig), "--namespace", cluster.ns),
        *("--service", "lwgpu", "--secret", SECRET, "--webhook-config", *configs),
    ]
    assert cli.main(argv) == code
    printed = capsys.readouterr()
    assert printed.out.startswith(out.format(ns=cluster.ns))
    assert printed.err.startswith(err.format(name=cluster.name))
    if code:
        assert printed.err.count("\n") == 1
        assert cluster.bundles() == {None}
    else:
        assert cluster.bundles() == {cluster.secret_set().ca_bundle_b64()}


def test_cli_without_any_cluster_configuration(tmp_path):
    result = run_certs(
        *("install", "--kubeconfig", tmp_path / "absent", "--namespace", "n", "--service", "s"),
        *("--secret", "x", "--webhook-config", "w"),
    )
    assert result.returncode == 2
    assert (
        result.stderr.startswith("certs: error: no Kubernetes configuration")
        and result.stderr.count("\n") == 1
    )
