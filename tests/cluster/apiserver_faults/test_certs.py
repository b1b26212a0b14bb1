"""`certs install` when the API server stalls or throttles as its first write leaves
(test_inventory.py here says how the faults are made): a one-line error with
the cause, every caBundle still verifying the serving certificate stored (tests/certs/
interrupted.py's invariant), and the next run completing."""

from __future__ import annotations

import threading
import time

import pytest

from certs.errors import CertError
from certs.install import install
from tests.certs.install_cluster import Cluster
from tests.certs.interrupted import CaNames, observe
from tools.reliability.slow_proxy import SlowProxy
from tools.reliability.throttle import throttled
from webhook.kube import client as kube_client
from webhook.kube.client import DEFAULT_TIMEOUT_S

WRITES = {"POST", "PUT", "PATCH", "DELETE"}


@pytest.fixture
def installer(control_plane, namespace, service_accounts, tmp_path):
    """The test's webhook configurations (tests/certs/install_cluster.py) and a kubeconfig of a
    ServiceAccount bound to cluster-admin, that reaches the apiserver through a SlowProxy: an
    account, unlike the admin (system:masters is exempt), that APF can throttle."""
    cluster = Cluster(control_plane, namespace)
    cluster.create_configs()
    direct = service_accounts.create("installer")
    binding = f"{namespace.name}-installer"
    control_plane.kubectl(
        "create", "clusterrolebinding", binding, "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace.name}:installer",
    )  # fmt: skip
    host, port = control_plane.server.removeprefix("https://").split(":")
    proxy = SlowProxy((host, int(port)))
    kubeconfig = tmp_path / "through-proxy.kubeconfig"
    kubeconfig.write_text(direct.read_text().replace(control_plane.server, proxy.url))
    yield cluster, kubeconfig, proxy
    proxy.close()
    control_plane.kubectl("delete", "clusterrolebinding", binding)
    cluster.delete_configs()


def install_bounded(cluster, kubeconfig, limit_s: float):
    """`install` on a client built as the CLI builds it; its result or CertError, or None when
    it had not ended after `limit_s` (it is left running, on a daemon thread)."""
    outcome: list = []

    def run() -> None:
        try:
            # through the module, so that `kube_requests` follows the client
            api = kube_client.api_client(str(kubeconfig))
            outcome.append(
                install(api, cluster.spec, cluster.places, [cluster.name, cluster.final])
            )
        except CertError as err:
            outcome.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    return outcome[0] if outcome else None


@pytest.mark.parametrize("fault", ["stalled network", "throttled"])
def test_certs_install_gives_up_with_the_cause_and_the_next_run_completes(
    installer, control_plane, namespace, kube_requests, tmp_path, fault
):
    """The fault strikes as the first write leaves. A stalled answer ends at the client's
    read deadline (`DEFAULT_TIMEOUT_S`; before, the installer waited for ever); a 429 of a
    PATCH, which urllib3 does not retry, at once. Either way a one-line CertError, the
    caBundles verify whatever serving certificate is stored, and the next run completes."""
    cluster, kubeconfig, proxy = installer
    strikes: list = []

    def strike(sent) -> None:
        if sent.method in WRITES and not strikes:
            if fault == "stalled network":
                proxy.stall()
                strikes.append(None)
            else:
                account = [(namespace.name, "installer")]
                strikes.append(throttled(control_plane, namespace.name, account, tmp_path))
                strikes[0].__enter__()

    kube_requests.before.append(strike)
    began = time.monotonic()
    try:
        failed = install_bounded(cluster, kubeconfig, limit_s=4 * DEFAULT_TIMEOUT_S[1])
        took = time.monotonic() - began
    finally:
        kube_requests.before.clear()
        proxy.resume()
        for throttle in strikes:
            if throttle is not None:
                throttle.__exit__(None, None, None)
    expected = {
        "stalled network": "cannot reach the Kubernetes API: timed out",
        "throttled": "Kubernetes API answered 429 Too Many Requests:"
        " Too many requests, please try again later.",
    }[fault]
    assert isinstance(failed, CertError) and str(failed) == expected, failed
    assert took < 3 * DEFAULT_TIMEOUT_S[1]
    names = CaNames()
    assert observe(cluster, names, tmp_path).verifies is not False
    done = install_bounded(cluster, kubeconfig, limit_s=60)
    assert done is not None and not isinstance(done, CertError), done
    assert observe(cluster, names, tmp_path).verifies is True
