"""Real API Priority and Fairness throttling of chosen ServiceAccounts: kube-apiserver answers
their requests 429 Too Many Requests with a Retry-After header, as a busy cluster does.

`Throttle` routes the accounts, and a "hog" account of its own, through a FlowSchema to a
PriorityLevelConfiguration with no concurrency of its own (`nominalConcurrencyShares: 0`),
none to borrow, and `limitResponse: Reject`. A level that small still runs a request when
nothing else of it runs (`canAccommodateSeatsLocked` in staging/src/k8s.io/apiserver/pkg/util/
flowcontrol/fairqueuing/queueset/queueset.go), so the hog keeps one of its own running:
dry-run ConfigMap creates, one after the other, that a validating webhook holds for `HOLD_S`
seconds each (its URL accepts TCP connections and never answers; `failurePolicy: Ignore`).
While one runs, every other request of the level is rejected at once (`tooManyRequests` in
staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go sets Retry-After;
util/flowcontrol/dropped_requests_tracker.go raises it, up to 32 s, while rejections go on).
The level is free only in the moment between two of the hog's creates.

The objects have names of their own and are deleted by `close()`. The apiserver applies
FlowSchema changes a moment after they are written, so `start` returns once a request of the
hog's account is rejected.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tools.cluster.controlplane import ControlPlane
from tools.cluster.kubelet import Kubelet
from tools.waiting import wait_for
from webhook.kube.client import api_client

NAME = "lwgpu-throttle"
HOG = "lwgpu-hog"
HOG_LABEL = {"lwgpu-test/hog": "true"}
HOLD_S = 30  # the longest timeoutSeconds a webhook may have


class Throttle:
    """429 for `accounts` ((namespace, name) ServiceAccounts) between `start()` and `close()`;
    the hog account lives in `namespace`, which must exist."""

    def __init__(
        self, plane: ControlPlane, namespace: str, accounts: list[tuple[str, str]], work: Path
    ) -> None:
        self.plane, self.namespace, self.accounts, self.work = plane, namespace, accounts, work
        self._silent = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._hog, name="apf-hog", daemon=True)

    def start(self) -> Throttle:
        """Create the objects, start the hog, return once the apiserver rejects."""
        self.plane.kubectl("apply", "-f", "-", input=json.dumps(self._objects()))
        kubeconfig = Kubelet(self.plane, self.work).token_kubeconfig(self.namespace, HOG)
        self._core = client.CoreV1Api(api_client(str(kubeconfig)))
        self._thread.start()
        probing = api_client(str(kubeconfig)).configuration
        # urllib3 would wait out Retry-After and retry (Retry.RETRY_AFTER_STATUS_CODES): not here
        probing.retries = 0
        probe = client.CoreV1Api(client.ApiClient(probing))
        wait_for(lambda: _rejected(probe, self.namespace), 60, 0.2, "a 429 from the apiserver")
        return self

    def close(self) -> None:
        """Stop the hog and delete every object `start` made."""
        self._stop.set()
        objects = json.dumps(self._objects())
        self.plane.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=objects)
        # The apiserver's connections queued on the silent port are reset: a held create ends
        # now (failing open) instead of after HOLD_S.
        self._silent.close()
        if self._thread.is_alive():
            self._thread.join(HOLD_S + 5)

    def _objects(self) -> dict[str, Any]:
        port = self._silent.getsockname()[1]
        hog = {"kind": "ServiceAccount", "name": HOG, "namespace": self.namespace}
        subjects = [
            {"kind": "ServiceAccount", "serviceAccount": {"namespace": ns, "name": name}}
            for ns, name in [*self.accounts, (self.namespace, HOG)]
        ]
        every = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True}
        return {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": HOG, "namespace": self.namespace},
                },
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": HOG, "namespace": self.namespace},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "edit",
                    },
                    "subjects": [hog],
                },
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": NAME},
                    "webhooks": [
                        {
                            "name": "hold.lwgpu-test.io",
                            "clientConfig": {"url": f"https://127.0.0.1:{port}/hold"},
                            "rules": [
                                {
                                    "operations": ["CREATE"],
                                    "apiGroups": [""],
                                    "apiVersions": ["v1"],
                                    "resources": ["configmaps"],
                                }
                            ],
                            "objectSelector": {"matchLabels": HOG_LABEL},
                            "failurePolicy": "Ignore",
                            "sideEffects": "None",
                            "admissionReviewVersions": ["v1"],
                            "timeoutSeconds": HOLD_S,
                        }
                    ],
                },
                {
                    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                    "kind": "PriorityLevelConfiguration",
                    "metadata": {"name": NAME},
                    "spec": {
                        "type": "Limited",
                        "limited": {
                            "nominalConcurrencyShares": 0,
                            "lendablePercent": 0,
                            "borrowingLimitPercent": 0,
                            "limitResponse": {"type": "Reject"},
                        },
                    },
                },
                {
                    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                    "kind": "FlowSchema",
                    "metadata": {"name": NAME},
                    "spec": {
                        "priorityLevelConfiguration": {"name": NAME},
                        # before every suggested FlowSchema but exempt (1) and probes (2)
                        "matchingPrecedence": 100,
                        "distinguisherMethod": {"type": "ByUser"},
                        "rules": [
                            {
                                "subjects": subjects,
                                "resourceRules": [every | {"namespaces": ["*"]}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                            }
                        ],
                    },
                },
            ],
        }

    def _hog(self) -> None:
        # One create after the other: the level is free only for the moment between two.
        config_map = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(generate_name="hog-", labels=HOG_LABEL)
        )
        while not self._stop.is_set():
            try:
                self._core.create_namespaced_config_map(
                    self.namespace, config_map, dry_run="All", _request_timeout=HOLD_S + 10
                )
            except ApiException as err:
                # 429: another request took the level in that moment; else the account is gone
                self._stop.wait(0.02 if err.status == 429 else 0.2)
            except (OSError, urllib3.exceptions.HTTPError):
                self._stop.wait(0.2)


def _rejected(core: client.CoreV1Api, namespace: str) -> bool:
    """Whether a GET of the hog's account is answered 429 now (the FlowSchema applies)."""
    try:
        core.list_namespaced_config_map(namespace, limit=1)
    except ApiException as err:
        return bool(err.status == 429)
    return False


@contextlib.contextmanager
def throttled(
    plane: ControlPlane, namespace: str, accounts: list[tuple[str, str]], work: Path
) -> Iterator[Throttle]:
    """`Throttle(...).start()` for the block's duration."""
    throttle = Throttle(plane, namespace, accounts, work)
    try:
        yield throttle.start()
    finally:
        throttle.close()
