"""lwgpu's API clients while the real kube-apiserver (and its etcd) misbehave, on a
control plane of their own (conftest.py here): here the node inventory behind
`discoverProfiles` and the reviews it serves; `label-node` in test_labeller.py,
`certs install` in test_certs.py.

The faults are real: kube-apiserver stopped and started again; etcd compacted below the
inventory's resourceVersion while the apiserver's watch cache for Nodes is off, so the watch
resumed from it gets 410 Gone from etcd itself; API Priority and Fairness rejecting with 429
(tools/reliability/throttle.py); a refusal once the grant is gone. Only the slow network is
imitated, by a delaying TCP proxy between the client and the apiserver (tools/reliability/
slow_proxy.py). Each test asserts how many lines the failure logged (each cause once, not
once per retry) and that the Nodes are followed again afterwards. That reviews never wait on
the API server is tests/server/test_discovery.py's (apiserver stopped) and
test_a_review_is_answered_while_the_api_server_is_stalled below.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

from kubernetes import client

from tests.cluster.apiserver_faults.support import (
    DISCOVERY,
    LABELS,
    LOG,
    closing_listener,
    messages,
    restart,
    stopped_apiserver,
)
from tests.server.test_discovery import selectors
from tests.support.builders import MEM, NAME
from tests.support.paths import REPO
from tools.loopback.server import serving
from tools.reliability.slow_proxy import SlowProxy
from tools.reliability.throttle import throttled
from tools.waiting import wait_for
from webhook.kube import client as kube_client
from webhook.kube.client import DEFAULT_TIMEOUT_S
from webhook.kube.inventory import WAS_ALLOWED, NodeInventory
from webhook.node import labeller
from webhook.scheduling import MEMORY_LABELS


def classes(inventory: NodeInventory, *mems: str) -> list[str]:
    """The inventory's classes among `mems` (the test's own nvidia_mem values)."""
    return [p.node_selector[MEM] for p in inventory.profiles() if p.node_selector[MEM] in mems]


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
                restart(control_plane)
            wait_for(lambda: "answers again" in caplog.text, 60, what="the inventory back")
            wait_for(lambda: "label-node: the API server answers again" in lines, 60)
        finally:
            stop.set()
            inventory.stop()
            labelled.join(30)
    assert again == []
    back = f"node inventory: the API server {control_plane.server} answers again"
    assert messages(caplog, logging.INFO).count(back) == 1


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
    restart(control_plane, "--watch-cache-sizes=nodes#0")
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
        restart(control_plane)
    # A watch resumed below the compaction lists again: after a 410, or after the 500 the
    # apiserver may answer instead when the first event it meets lost its previous value to
    # the compaction ("etcd event received with PrevKv=nil"). A watch still open across the
    # compaction may go on without either, so not every label must list twice.
    assert "node inventory: watch expired (410), re-listing nodes" in messages(caplog, logging.INFO)
    assert messages(caplog, logging.ERROR) == []
    lists = Counter(r.query["labelSelector"][0] for r in kube_requests.lists())
    assert set(lists) == set(MEMORY_LABELS) and sum(lists.values()) > len(MEMORY_LABELS), lists


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
