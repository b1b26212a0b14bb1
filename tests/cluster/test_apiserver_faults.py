"""lwgpu's API clients while the real kube-apiserver (and its etcd) misbehave: the node
inventory behind `discoverProfiles`, `label-node` and `certs install`, on the session's control
plane (tests/support/cluster.py).

The faults are real: kube-apiserver stopped and started again; etcd compacted below the
inventory's resourceVersion while the apiserver's watch cache for Nodes is off, so the watch
resumed from it gets 410 Gone from etcd itself; API Priority and Fairness rejecting with 429
(tools/reliability/throttle.py). Only the slow network is imitated, by a delaying TCP proxy
between the client and the apiserver (tools/reliability/slow_proxy.py). Each test asserts how
many lines the failure logged (one per cause, not one per retry), that the Nodes are followed
again afterwards, and, for `certs install`, that every caBundle still verifies the serving
certificate (tests/certs/interrupted.py's invariant) and the next run completes.
That reviews never wait on the API server is tests/server/test_discovery.py's (apiserver
stopped) and test_a_review_is_answered_while_the_api_server_is_stalled below.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from certs.errors import CertError
from certs.install import install
from tests.certs.install_cluster import Cluster
from tests.certs.interrupted import CaNames, observe
from tests.fakes.nvml import FakeNVML
from tests.server.test_discovery import selectors
from tests.support.builders import MEM, NAME
from tests.support.paths import REPO
from tools.loopback.server import free_port, serving
from tools.reliability.slow_proxy import SlowProxy
from tools.reliability.throttle import throttled
from tools.waiting import wait_for
from webhook.cli import main
from webhook.kube import client as kube_client
from webhook.kube.client import DEFAULT_TIMEOUT_S
from webhook.kube.inventory import WAS_ALLOWED, NodeInventory
from webhook.node import labeller
from webhook.scheduling import MEMORY_LABELS

LOG = "webhook.kube.inventory"
DISCOVERY = "../components/discovery/discovery.yaml"
LABELS = {"aliyun.accelerator/nvidia_count": "1", MEM: "2048MiB", NAME: "GRID-P4-2Q"}
WRITES = {"POST", "PUT", "PATCH", "DELETE"}


def classes(inventory: NodeInventory, *mems: str) -> list[str]:
    """The inventory's classes among `mems` (the test's own nvidia_mem values)."""
    return [p.node_selector[MEM] for p in inventory.profiles() if p.node_selector[MEM] in mems]


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    """The inventory's log lines at exactly `level`."""
    return [r.getMessage() for r in caplog.records if r.name == LOG and r.levelno == level]


def stopped_apiserver(plane):
    """Stop kube-apiserver aside (its grace period takes a while); the caller starts it again
    from its own thread: components start with PR_SET_PDEATHSIG, which fires when the thread
    that started them ends."""
    stopping = threading.Thread(target=plane.stop, args=("kube-apiserver",))
    stopping.start()
    return stopping


def test_label_node_says_an_outage_once_and_that_it_ended_once(
    own_nodes, control_plane, kube_requests
):
    """With --interval the labeller retries every tick while the apiserver is down; it says
    so once, with the cause in a few words, and once that the apiserver answers again. Before,
    it logged every tick, each line with urllib3's message naming a new connection object."""
    node = own_nodes.create("outage", {"kubernetes.io/os": "linux"})
    core = client.CoreV1Api(kube_client.api_client(str(control_plane.kubeconfig)))
    lines, stop = [], threading.Event()
    thread = threading.Thread(
        target=labeller.run, args=(core, node, LABELS, 0.1, stop, lines.append)
    )
    thread.start()
    try:
        assert wait_for(lambda: own_nodes.labels(node).get(MEM) == "2048MiB", timeout=60)
        stopping = stopped_apiserver(control_plane)
        try:
            wait_for(lambda: any("unreachable" in line for line in lines), 60, what="the outage")
            tried = len(kube_requests.sent)
            wait_for(lambda: len(kube_requests.sent) >= tried + 5, 60, what="5 more attempts")
        finally:
            stopping.join(60)
            control_plane.restart_apiserver()
        own_nodes.relabel(node, dict.fromkeys(LABELS))
        assert wait_for(lambda: own_nodes.labels(node).get(MEM) == "2048MiB", timeout=60)
    finally:
        stop.set()
        thread.join(30)
    failures = [line for line in lines if "unreachable" in line]
    down = f"label-node: API server {core.api_client.configuration.host} unreachable: "
    assert f"{down}connection refused; retrying every 0.1s" in failures
    assert len(set(failures)) == len(failures) <= 3  # a stopping apiserver may reset first
    assert lines.count("label-node: the API server answers again") == 1


@contextlib.contextmanager
def closing_listener(port: int) -> Iterator[None]:
    """On `port`, what a load balancer with no backend does: accept, then close at once."""
    listener = socket.create_server(("127.0.0.1", port))
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError):
                listener.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)


def test_causes_that_alternate_are_each_said_once(control_plane, own_nodes, kube_requests, caplog):
    """The apiserver stopped (connection refused), then a listener on its port that closes
    each connection, then nothing again: the inventory and the labeller say each cause once,
    not once per change of cause (before, "connection refused" was said again after the
    other), and once that the API server answers again."""
    node = own_nodes.create("alternating", {"kubernetes.io/os": "linux"})
    core = client.CoreV1Api(kube_requests.follow(control_plane.api()))
    labelling = client.CoreV1Api(kube_client.api_client(str(control_plane.kubeconfig)))
    port = int(control_plane.server.rsplit(":", 1)[1])
    lines, stop = [], threading.Event()
    labelled = threading.Thread(
        target=labeller.run, args=(labelling, node, LABELS, 0.1, stop, lines.append)
    )

    def refused() -> bool:
        return any("connection refused" in m for m in messages(caplog, logging.WARNING)) and any(
            "connection refused" in line for line in lines
        )

    def attempts(count: int) -> None:
        tried = len(kube_requests.sent)
        wait_for(lambda: len(kube_requests.sent) >= tried + count, 60, what=f"{count} attempts")

    with caplog.at_level(logging.DEBUG, logger=LOG):
        inventory = NodeInventory(core, backoff=(0.05, 0.1), watch_timeout_s=1).start()
        labelled.start()
        try:
            assert inventory.wait_synced(60)
            assert wait_for(lambda: own_nodes.labels(node).get(MEM) == "2048MiB", timeout=60)
            stopping = stopped_apiserver(control_plane)
            try:
                wait_for(refused, 60, what="connection refused, said")
                stopping.join(60)  # its port is free
                with closing_listener(port):
                    attempts(10)
                caplog.clear()
                lines.clear()
                attempts(10)  # connection refused again
                said = [line for line in lines if "unreachable" in line]
                again = messages(caplog, logging.WARNING) + said
            finally:
                stopping.join(60)
                control_plane.restart_apiserver()
            wait_for(lambda: "answers again" in caplog.text, 60, what="the inventory back")
            wait_for(lambda: "label-node: the API server answers again" in lines, 60)
        finally:
            stop.set()
            inventory.stop()
            labelled.join(30)
    assert again == []
    back = f"node inventory: the API server {control_plane.server} answers again"
    assert messages(caplog, logging.INFO).count(back) == 1


def test_label_node_once_on_a_dead_address_is_one_line(tmp_path, monkeypatch, capsys, caplog):
    """`label-node` once, nothing listening: one line with the cause, exit 1. urllib3 retried
    the connection three times and warned each time; those warnings are not the labeller's."""
    FakeNVML([("GRID P4-2Q", 2048 * 2**20)]).install(monkeypatch)
    server = f"https://127.0.0.1:{free_port()}"
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(
        '{"apiVersion": "v1", "kind": "Config", "current-context": "c", "clusters": [{"name":'
        f' "c", "cluster": {{"server": "{server}", "insecure-skip-tls-verify": true}}}}],'
        ' "users": [{"name": "u", "user": {}}],'
        ' "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}'
    )
    monkeypatch.setenv("KUBECONFIG", str(dead))
    with caplog.at_level(logging.DEBUG):
        assert main(["label-node", "--node", "gpu-1"]) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert (
        capsys.readouterr().err
        == f"label-node: API server {server} unreachable: connection refused\n"
    )


def test_throttled_inventory_says_429_once_and_follows_the_nodes_after(
    control_plane, own_nodes, service_accounts, namespace, tmp_path, caplog
):
    """While APF rejects the webhook's ServiceAccount, the inventory keeps its snapshot and
    retries (urllib3 first waits out Retry-After three times for each GET); one warning names
    the 429. A Node labelled meanwhile is a class once the throttle ends."""
    kubeconfig = service_accounts.create("webhook")
    service_accounts.grant("webhook", DISCOVERY, "lwgpu-discovery")
    own_nodes.create("before", {MEM: "4352MiB", NAME: "Throttled-4_25G"})
    core = client.CoreV1Api(kube_client.api_client(str(kubeconfig)))
    host = core.api_client.configuration.host
    with caplog.at_level(logging.DEBUG, logger=LOG):
        inventory = NodeInventory(core, backoff=(0.05, 0.2), watch_timeout_s=1).start()
        try:
            assert inventory.wait_synced(60)
            account = [(namespace.name, "webhook")]
            with throttled(control_plane, namespace.name, account, tmp_path):
                wait_for(lambda: messages(caplog, logging.WARNING), 60, what="the 429 said")
                wait_for(lambda: len(messages(caplog, logging.DEBUG)) >= 2, 60, what="retries")
                own_nodes.create("during", {MEM: "4608MiB", NAME: "Throttled-4_5G"})
                snapshot = inventory.profiles()
                assert inventory.profiles() is snapshot  # answered from the snapshot at once
            assert wait_for(
                lambda: classes(inventory, "4352MiB", "4608MiB") == ["4352MiB", "4608MiB"], 60
            )
        finally:
            inventory.stop()
    assert messages(caplog, logging.WARNING) == [
        f"node inventory: API server {host} answered 429 Too Many Requests;"
        " keeping the last snapshot, retrying in 0.05s"
    ]
    assert messages(caplog, logging.INFO) == [
        f"node inventory: the API server {host} answers again"
    ]


def test_a_refusal_after_the_nodes_were_listed_is_a_warning_saying_why(
    control_plane, service_accounts, namespace, caplog
):
    """A 403 once the Nodes were listed is not an install without the grant: right after a
    restart, kube-apiserver refuses until it has read its RBAC bindings (measured by
    tools/reliability/apiserver_faults.py), or the grant was removed, as here. A warning that
    says so, not the install's error and fix; once the grant is back, the API server answers."""
    kubeconfig = service_accounts.create("webhook")
    service_accounts.grant("webhook", DISCOVERY, "lwgpu-discovery")
    binding = f"{namespace.name}-lwgpu-discovery"
    core = client.CoreV1Api(kube_client.api_client(str(kubeconfig)))
    with caplog.at_level(logging.INFO, logger=LOG):
        inventory = NodeInventory(core, backoff=(0.05, 0.2), watch_timeout_s=1).start()
        try:
            assert inventory.wait_synced(60)
            control_plane.kubectl("delete", "clusterrolebinding", binding)
            wait_for(lambda: messages(caplog, logging.WARNING), 60, what="the refusal said")
            control_plane.kubectl(
                "create", "clusterrolebinding", binding, f"--clusterrole={binding}",
                f"--serviceaccount={namespace.name}:webhook",
            )  # fmt: skip
            wait_for(lambda: "answers again" in caplog.text, 60, what="the grant back")
        finally:
            inventory.stop()
    refused = (
        f"node inventory: API server {core.api_client.configuration.host} answered 403"
        f' Forbidden: nodes is forbidden: User "system:serviceaccount:{namespace.name}:webhook"'
    )
    warnings = messages(caplog, logging.WARNING)
    assert warnings and all(w.startswith(refused) and WAS_ALLOWED in w for w in warnings)
    assert messages(caplog, logging.ERROR) == []


def test_after_etcd_compaction_the_resumed_watch_gets_410_and_lists_again(
    control_plane, own_nodes, kube_requests, caplog
):
    """With the watch cache off for Nodes (`--watch-cache-sizes=nodes#0`), a watch is served by
    etcd: resumed from a revision etcd compacted, it ends in an ERROR event 410 Expired
    (staging/src/k8s.io/apiserver/pkg/storage/etcd3/watcher.go: etcd's "required revision has
    been compacted", `logWatchChannelErr`). With the cache on, the cache answers 410 only below
    its own window (`GetIntervalLocked` in storage/cacher/watch_cache_history.go;
    tests/kube/test_inventory.py). Each of the inventory's watches lists once more, says so
    once, and follows the Nodes from there."""
    control_plane.restart_apiserver("--watch-cache-sizes=nodes#0")
    try:
        own_nodes.create("before", {MEM: "4864MiB", NAME: "Compacted-4_75G"})
        core = client.CoreV1Api(kube_requests.follow(control_plane.api()))
        with caplog.at_level(logging.INFO, logger=LOG):
            inventory = NodeInventory(core, backoff=(0.05, 0.2), watch_timeout_s=1).start()
            try:
                assert inventory.wait_synced(60)
                # Two writes to a Node outside the selector, no event for the watch: etcd's
                # history from the listed revision + 1 on, where the watch resumes, is then
                # compacted too.
                elsewhere = own_nodes.create("elsewhere", {"kubernetes.io/os": "linux"})
                own_nodes.relabel(elsewhere, {"lwgpu-test/bumped": "true"})
                control_plane.compact_etcd()
                wait_for(lambda: "(410)" in caplog.text, 60, what="the watch to expire")
                own_nodes.create("after", {MEM: "5376MiB", NAME: "Compacted-5_25G"})
                assert wait_for(
                    lambda: classes(inventory, "4864MiB", "5376MiB") == ["4864MiB", "5376MiB"], 60
                )
            finally:
                inventory.stop()
    finally:
        control_plane.restart_apiserver()
    # one watch per memory label, each resumed below the compaction: each lists once more
    assert messages(caplog, logging.INFO) == [
        "node inventory: watch expired (410), re-listing nodes"
    ] * len(MEMORY_LABELS)
    lists = [r.query["labelSelector"][0] for r in kube_requests.lists()]
    assert sorted(lists) == sorted(MEMORY_LABELS * 2)


def test_a_review_is_answered_while_the_api_server_is_stalled(
    tmp_path, control_plane, own_nodes, service_accounts
):
    """`serve` discovering through a network that stops carrying the apiserver's answers: the
    inventory's watch hangs, and the reviews are answered from its snapshot as fast as ever
    (one waiting on the API server would take the client's 20 s read deadline)."""
    kubeconfig = service_accounts.create("webhook")
    service_accounts.grant("webhook", DISCOVERY, "lwgpu-discovery")
    own_nodes.create("stalled", {MEM: "7611MiB", NAME: "Tesla-P4"})
    host, port = control_plane.server.removeprefix("https://").split(":")
    proxy = SlowProxy((host, int(port)))
    slow = tmp_path / "through-proxy.kubeconfig"
    slow.write_text(kubeconfig.read_text().replace(control_plane.server, proxy.url))
    policy = tmp_path / "discovering.yaml"
    shipped = (REPO / "policies" / "default.yaml").read_text()
    policy.write_text(shipped.replace("spec:\n", "spec:\n  discoverProfiles: true\n", 1))
    work = tmp_path / "server"
    work.mkdir()
    try:
        with serving(work, policy, env={"KUBECONFIG": str(slow)}) as server:
            # 7611MiB is this Node's; the fleet's and the static classes offer 8192MiB at best
            wait_for(lambda: selectors(server) == {"7611MiB"}, 60, what="the discovered class")
            proxy.stall()
            began = time.monotonic()
            assert selectors(server) == {"7611MiB"}
            assert time.monotonic() - began < DEFAULT_TIMEOUT_S[1] / 4
    finally:
        proxy.close()


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
