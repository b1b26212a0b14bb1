"""The webhook configurations, the Secrets and the ConfigMap of one `certs install` test, on the
real kube-apiserver of the session (tests/support/cluster.py); the `cluster` fixture
(tests/certs/conftest.py) makes them.

The Secrets and the ConfigMap live in a namespace of the test's own, and the caBundles go into
webhook configurations of its own (cluster-scoped, named after that namespace, deleted at the
end); they have no `rules`, so the apiserver never calls them (`ShouldCallHook` in
staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/generic/webhook.go calls a webhook
only when one of its rules matches).
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from datetime import UTC, datetime

from kubernetes import client

from certs import CertSet, Spec
from certs.install import install
from certs.rotate import rotate
from certs.rotation import ensure
from certs.stored import Places

ADM = "admissionregistration.k8s.io/v1"
MUTATING, VALIDATING = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"
T0 = datetime(2030, 1, 1, tzinfo=UTC)
SECRET = "lwgpu-tls"
CA_SECRET = "lwgpu-ca"
BUNDLE = "lwgpu-ca-bundle"
WRITER = "test.lwgpu.io/writer"
TLS_FILES = {"tls.crt", "tls.key"}


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
        self.places = Places(self.ns, SECRET, CA_SECRET, BUNDLE)
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
        elif kind == "ConfigMap":
            self.core.patch_namespaced_config_map(name, self.ns, body)
        else:
            self._call("patch", kind, name, body)

    def set_bundles(self, b64: str) -> None:
        """Every webhook's caBundle set to `b64`, as the admin."""
        for kind, name in self.targets:
            hooks = self.config(kind, name)["webhooks"]
            for hook in hooks:
                hook["clientConfig"]["caBundle"] = b64
            self._call("patch", kind, name, {"webhooks": hooks})

    def bundles(self) -> set[str | None]:
        """Every caBundle across the three configurations (None: a webhook without one)."""
        return {
            hook["clientConfig"].get("caBundle")
            for kind, name in self.targets
            for hook in self.config(kind, name)["webhooks"]
        }

    def versions(self) -> list[str]:
        """The resourceVersions of the Secrets, the ConfigMap and the configurations: what any
        write changes."""
        configs = [self.config(k, n)["metadata"]["resourceVersion"] for k, n in self.targets]
        stored = [self.secret(), self.secret(CA_SECRET), self.bundle_map()]
        return [obj["metadata"]["resourceVersion"] for obj in stored] + configs

    def secret(self, name: str = SECRET) -> dict:
        read = self.core.read_namespaced_secret(name, self.ns, _preload_content=False)
        return json.loads(read.data)

    def bundle_map(self) -> dict:
        read = self.core.read_namespaced_config_map(BUNDLE, self.ns, _preload_content=False)
        return json.loads(read.data)

    def secret_set(self) -> CertSet:
        """The set the two Secrets hold: the serving Secret only `tls.crt` and `tls.key` (the
        CA key never where the webhook mounts it), the CA Secret only the CA."""
        serving, ca = self.secret(), self.secret(CA_SECRET)
        assert (serving["type"], set(serving["data"])) == ("kubernetes.io/tls", TLS_FILES)
        assert (ca["type"], set(ca["data"])) == ("Opaque", {"ca.crt", "ca.key"})
        files = {k: base64.b64decode(v) for k, v in {**serving["data"], **ca["data"]}.items()}
        cert_set = CertSet.from_files(files, "secrets")
        assert self.bundle_map()["data"] == {"ca.crt": cert_set.bundle_pem().decode()}
        return cert_set

    def seed_secret(self, **fields) -> None:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET}, **fields}
        self.core.create_namespaced_secret(self.ns, body)

    def interfere(self, kube_requests, method: str, path: str, times: int) -> list[int]:
        """Before each of the next `times` requests `method` `path`, another writer annotates
        the object it targets (as the admin); returns the list that counts those writes."""
        done: list[int] = []
        if "webhookconfigurations" in path:
            kind, name = MUTATING, self.name
        else:
            kind, name = "Secret", CA_SECRET if path.endswith(f"{CA_SECRET}$") else SECRET

        def write(sent) -> None:
            if sent.method == method and re.search(path, sent.path) and len(done) < times:
                done.append(1)
                self.annotate(kind, name, str(len(done)))

        kube_requests.before.append(write)
        return done

    def seed_set(self, issued: datetime, days: int) -> None:
        """A set as an earlier `certs install` left it: issued at `issued`, serving certificates
        of `days` days, its caBundle in every configuration."""
        spec = replace(self.spec, days=days)
        install(self.plane.api(), spec, self.places, [self.name, self.final], now=issued)

    def seed_older_install(self, issued: datetime, days: int) -> CertSet:
        """The serving Secret as an install made before the CA had a Secret of its own left
        it, all four files, and its CA in every caBundle. Returns that set."""
        cert_set, _ = ensure(None, replace(self.spec, days=days), issued)
        data = {k: base64.b64encode(v).decode() for k, v in cert_set.to_files().items()}
        self.seed_secret(type="kubernetes.io/tls", data=data)
        self.set_bundles(cert_set.ca_bundle_b64())
        return cert_set

    def install(self, kube_requests, names=None, **kwargs):
        """`install` as the admin, through a client whose requests `kube_requests` records."""
        api = kube_requests.follow(self.plane.api())
        names = [self.name, self.final] if names is None else names
        return install(api, self.spec, self.places, names, **kwargs)

    def rotate(self, kube_requests, **kwargs):
        """`rotate` as the admin, recorded like `install`."""
        return rotate(kube_requests.follow(self.plane.api()), self.spec, self.places, **kwargs)
