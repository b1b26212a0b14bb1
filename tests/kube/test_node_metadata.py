"""What the node inventory asks the real kube-apiserver for (webhook/kube/node_metadata.py):
only the Nodes' metadata, the list in pages of one snapshot, the watch from its
resourceVersion. The inventory's behaviour on top of it is test_inventory.py's; the 410 of an
expired watch, tests/cluster/apiserver_faults/test_inventory.py's."""

import http.client
import json
from urllib.parse import urlsplit

from kubernetes import client, watch

from tests.support.builders import MEM, NAME
from webhook.kube import node_metadata


def raw_get(plane, path: str, accept: str) -> dict:
    """One GET as the admin with this Accept header, the body parsed."""
    url = urlsplit(plane.server)
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=plane.admin_tls())
    try:
        conn.request("GET", path, headers={"Accept": accept})
        answer = conn.getresponse()
        assert answer.status == 200
        return json.loads(answer.read())
    finally:
        conn.close()


def test_the_apiserver_sends_nodes_metadata_only(control_plane, own_nodes):
    """kube-apiserver converts the list, not falling back to plain Nodes."""
    own_nodes.create("meta", {MEM: "2816MiB", NAME: "Meta-2_75G"})
    body = raw_get(control_plane, f"/api/v1/nodes?labelSelector={MEM}", node_metadata.LIST_ACCEPT)
    assert body["kind"] == "PartialObjectMetadataList"
    assert body["items"] and all(
        set(i) == {"kind", "apiVersion", "metadata"} for i in body["items"]
    )


def test_a_list_in_pages_is_every_node_and_the_watch_follows_from_it(
    control_plane, own_nodes, kube_requests, monkeypatch
):
    """Pages of two Nodes: every Node the admin lists, once; a watch from the list's
    resourceVersion then sees a new Node as PartialObjectMetadata, not a V1Node model."""
    for i in range(5):
        own_nodes.create(f"paged{i}", {MEM: "2880MiB", "zone": str(i)})
    monkeypatch.setattr(node_metadata, "PAGE", 2)
    core = client.CoreV1Api(kube_requests.follow(control_plane.api()))
    listed, version = node_metadata.list_labels(core, MEM)
    admin = client.CoreV1Api(control_plane.api()).list_node(label_selector=MEM)
    assert listed == {n.metadata.name: n.metadata.labels for n in admin.items}
    pages = kube_requests.lists()
    assert len(pages) == (len(listed) + 1) // 2 and {p.query["limit"][0] for p in pages} == {"2"}
    assert version is not None and int(version) > 0
    late = own_nodes.create("late", {MEM: "2880MiB"})
    following = watch.Watch()
    for event in following.stream(
        node_metadata.watcher(core),
        label_selector=MEM,
        resource_version=version,
        timeout_seconds=10,
    ):
        if event["raw_object"]["metadata"]["name"] == late:
            following.stop()
    assert event["type"] == "ADDED" and event["object"] is event["raw_object"]
    assert event["raw_object"]["kind"] == "PartialObjectMetadata"
