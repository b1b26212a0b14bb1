"""Fixtures shared by the whole suite: one real server per module, and what the tests of lwgpu's
own Kubernetes clients need on the real control plane.

`server` is the real `webhook serve` (gunicorn, 2 workers, real TLS on a free loopback port)
with the shipped policy, started once per module that asks for it and stopped with SIGTERM
after its last test; a module changes how it starts by overriding `server_options`, whose dict
goes to `tools.loopback.server.serving` (`tls_dir`, `extra_args`, `workers`, ..., and
`policies` for another policy file).

`control_plane`, `lwgpu` and `namespace` (tests/support/cluster.py) are imported here, once for
the whole suite: a session fixture imported by several directories' conftests would be one
instance per directory, and so one control plane each. With them, for the tests of lwgpu's own
Kubernetes clients on the real kube-apiserver: `kube_requests` records what those clients
send, `own_nodes` makes Nodes of the test's own (the fleet's are never touched),
`service_accounts` gives a kubeconfig that acts as a ServiceAccount holding the rules of one
of the shipped ClusterRoles. Every cluster-scoped object they create has a name of its own and
is deleted at the end of the test.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import (
    control_plane,
    lwgpu,
    namespace,
    pytest_collection_modifyitems,
)
from tests.support.paths import DEPLOY, SHIPPED_POLICY
from tools.cluster.kubelet import Kubelet
from tools.loopback.server import Server, serving
from tools.waiting import wait_for
from webhook.kube import client as kube_client

# Fixtures, used by name, and the hook that marks the tests reaching `control_plane` `cluster`.
__all__ = ["control_plane", "lwgpu", "namespace", "pytest_collection_modifyitems"]

WRITES = {"POST", "PUT", "PATCH", "DELETE"}
_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def server_options() -> dict:
    """How `server` starts, beyond a fresh work folder: here the shipped policy and defaults."""
    return {}


@pytest.fixture(scope="module")
def server(tmp_path_factory, server_options) -> Iterator[Server]:
    """The real server for this module's tests, started as `server_options` says."""
    options = dict(server_options)
    policies = options.pop("policies", SHIPPED_POLICY)
    with serving(tmp_path_factory.mktemp("server"), policies, **options) as running:
        yield running


@dataclass(frozen=True)
class SentRequest:
    """One request as lwgpu's client handed it to urllib3."""

    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str | None
    body: Any

    @property
    def watch(self) -> bool:
        """A watch (``?watch=true``), as opposed to a one-shot GET or LIST."""
        return self.query.get("watch") == ["true"]


class KubeRequests:
    """The requests lwgpu's Kubernetes clients sent during one test, in order.

    The answers are the real apiserver's; this only looks at the way out, where the client
    calls urllib3 (`kubernetes.client.rest.RESTClientObject.request`). `before` holds
    callables run with each request just before it leaves: a test uses one to act as a
    concurrent writer at an exact moment.
    """

    def __init__(self) -> None:
        self.sent: list[SentRequest] = []
        self.before: list[Callable[[SentRequest], None]] = []

    def follow(self, api_client):
        """Record every request `api_client` sends from now on; returns it."""
        original = api_client.rest_client.request

        def request(method, url, headers=None, body=None, post_params=None, _request_timeout=None):
            parts = urlsplit(url)
            sent = SentRequest(
                method,
                parts.path,
                parse_qs(parts.query),
                (headers or {}).get("Content-Type"),
                body,
            )
            for hook in list(self.before):
                hook(sent)
            self.sent.append(sent)
            return original(
                method,
                url,
                headers=headers,
                body=body,
                post_params=post_params,
                _request_timeout=_request_timeout,
            )

        api_client.rest_client.request = request
        return api_client

    def writes(self, since: int = 0) -> list[tuple[str, str]]:
        """(method, path) of every write from request number `since` on."""
        return [(r.method, r.path) for r in self.sent[since:] if r.method in WRITES]

    def lists(self) -> list[SentRequest]:
        """The GETs that are not watches."""
        return [r for r in self.sent if r.method == "GET" and not r.watch]


@pytest.fixture
def kube_requests(monkeypatch) -> KubeRequests:
    """Records the requests of clients the test follows, and of every client lwgpu's commands
    build through `webhook.kube.client.api_client` (`label-node`, `certs install`) in-process."""
    requests = KubeRequests()
    build = kube_client.api_client
    monkeypatch.setattr(
        kube_client, "api_client", lambda *args, **kwargs: requests.follow(build(*args, **kwargs))
    )
    return requests


class OwnNodes:
    """Nodes this test creates (no kubelet: API objects with labels), deleted at its end."""

    def __init__(self, plane) -> None:
        self.plane = plane
        self.names: list[str] = []

    @property
    def core(self):
        """The admin's CoreV1Api, on fresh connections: a kept-alive one may lead to an
        apiserver that a test restarted, and a POST on it is not retried."""
        return client.CoreV1Api(self.plane.api())

    def create(self, hint: str, labels: dict[str, str]) -> str:
        """A new Node with exactly `labels`; its name starts with `hint` and is unique."""
        name = f"{hint}-{next(_numbers)}-{os.getpid()}"
        # No allocatable and so room for no pod: kube-scheduler never binds another test's pod
        # here, whatever GPU labels it carries (noderesources/fit.go, fitsRequest: pod count).
        self.core.create_node({"metadata": {"name": name, "labels": labels}})
        self.names.append(name)
        return name

    def relabel(self, name: str, labels: dict[str, str | None]) -> None:
        """Merge-patch labels onto the Node; a None value removes that label."""
        self.core.patch_node(
            name, {"metadata": {"labels": labels}}, _content_type="application/merge-patch+json"
        )

    def labels(self, name: str) -> dict[str, str]:
        """The Node's labels as stored."""
        return dict(self.core.read_node(name).metadata.labels or {})

    def delete(self, name: str) -> None:
        """Delete the Node now (Nodes carry no finalizer: it is gone when this returns)."""
        self.core.delete_node(name)
        self.names.remove(name)

    def close(self) -> None:
        core = self.core
        for name in self.names:
            try:
                core.delete_node(name)
            except ApiException as err:
                if err.status != 404:
                    raise


@pytest.fixture
def own_nodes(control_plane) -> Iterator[OwnNodes]:
    """Nodes of the test's own on the real control plane."""
    nodes = OwnNodes(control_plane)
    yield nodes
    nodes.close()


def shipped_rules(manifest: str, role: str) -> list[dict]:
    """The rules of ClusterRole `role` in deploy/base/`manifest`, as shipped."""
    for doc in yaml.safe_load_all((DEPLOY / "base" / manifest).read_text()):
        if doc and doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == role:
            return doc["rules"]
    raise LookupError(f"no ClusterRole {role} in deploy/base/{manifest}")


class ServiceAccounts:
    """ServiceAccounts in the test's namespace, each with a kubeconfig that authenticates as it
    (a requested token); `grant` gives one the rules of a shipped ClusterRole through a
    ClusterRole and ClusterRoleBinding named after the namespace, deleted at the end."""

    def __init__(self, plane, namespace, workdir: Path) -> None:
        self.namespace = namespace.name
        self.tokens = Kubelet(plane, workdir)
        admin = plane.api()
        self.core = client.CoreV1Api(admin)
        self.rbac = client.RbacAuthorizationV1Api(admin)
        self.authz = client.AuthorizationV1Api(admin)
        self.granted: list[str] = []

    def create(self, name: str) -> Path:
        """A new ServiceAccount with no rights yet; its kubeconfig."""
        self.core.create_namespaced_service_account(self.namespace, {"metadata": {"name": name}})
        return self.tokens.token_kubeconfig(self.namespace, name)

    def grant(self, account: str, manifest: str, role: str) -> None:
        """Bind the rules of shipped ClusterRole `role` to `account`; returns once the
        authorizer applies them (RBAC reads bindings through an informer, a moment later)."""
        rules = shipped_rules(manifest, role)
        name = f"{self.namespace}-{role}"
        self.rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
        self.granted.append(name)
        subject = {"kind": "ServiceAccount", "name": account, "namespace": self.namespace}
        role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
        self.rbac.create_cluster_role_binding(
            {"metadata": {"name": name}, "roleRef": role_ref, "subjects": [subject]}
        )
        first = rules[0]
        review = {
            "spec": {
                "user": f"system:serviceaccount:{self.namespace}:{account}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{self.namespace}"],
                "resourceAttributes": {
                    "group": first["apiGroups"][0],
                    "resource": first["resources"][0],
                    "verb": first["verbs"][0],
                },
            }
        }
        wait_for(
            lambda: self.authz.create_subject_access_review(review).status.allowed,
            timeout=60,
            what=f"{account} to be granted {role}",
        )

    def close(self) -> None:
        for name in self.granted:
            for delete in (self.rbac.delete_cluster_role_binding, self.rbac.delete_cluster_role):
                try:
                    delete(name)
                except ApiException as err:
                    if err.status != 404:
                        raise


@pytest.fixture
def service_accounts(control_plane, namespace, tmp_path) -> Iterator[ServiceAccounts]:
    """ServiceAccounts of the test's own, granted shipped ClusterRoles on demand."""
    accounts = ServiceAccounts(control_plane, namespace, tmp_path)
    yield accounts
    accounts.close()
