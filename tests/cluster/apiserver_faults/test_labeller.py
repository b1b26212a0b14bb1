"""`label-node` while kube-apiserver is away (test_inventory.py here says how the
faults are made): a failure is said once with its cause in a few words, however many ticks
retry it, and once that the API server answers again; urllib3's own retry warnings are not
the labeller's to print."""

from __future__ import annotations

import logging
import threading

from kubernetes import client

from tests.cluster.apiserver_faults.support import LABELS, restart, stopped_apiserver
from tests.fakes.nvml import FakeNVML
from tests.support.builders import MEM
from tools.loopback.server import free_port
from tools.waiting import wait_for
from webhook.cli import main
from webhook.kube import client as kube_client
from webhook.node import labeller


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
            restart(control_plane)
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
