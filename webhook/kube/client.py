"""The one Kubernetes client builder: the pod's service account first, kubeconfig after.

Every command that talks to the API (`label-node`, discovery in `serve`, `python -m certs
install`, `review --cluster`) builds its client here and hands it to logic that takes it as a
parameter. `connect` also says which namespace that configuration works in, as kubectl's
default for `-n`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from kubernetes import client, config

# Beside the service account's token in every pod (kubelet's projected volume).
POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# (connect, read) seconds for a request that names no timeout of its own: without one, an API
# server that stops answering (a stalled network) holds the caller for ever.
DEFAULT_TIMEOUT_S = (10, 20)


class KubeConfigError(RuntimeError):
    """Neither an in-cluster service account nor a usable kubeconfig was found."""


class BoundedApiClient(client.ApiClient):
    """An ApiClient whose every request has a deadline: `DEFAULT_TIMEOUT_S` where the call
    names none (a watch names its own)."""

    def call_api(  # type: ignore[no-untyped-def]  # the client's own signature is unannotated
        self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None
    ):
        return super().call_api(
            method, url, header_params, body, post_params, _request_timeout or DEFAULT_TIMEOUT_S
        )


class Connection(NamedTuple):
    """A client and the namespace its configuration names (kubectl's default `-n`)."""

    api: client.ApiClient
    namespace: str


def api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """An ApiClient from the pod's service account, else from kubeconfig, as kubectl does.

    An explicit `kubeconfig` or `context` skips the in-cluster attempt. Without
    `kubeconfig`, `$KUBECONFIG` is read now (the client library reads it once, at its
    import) and then `~/.kube/config`.
    """
    return connect(kubeconfig, context).api


def connect(kubeconfig: str | None = None, context: str | None = None) -> Connection:
    """`api_client`'s client and its namespace, chosen as client-go's clientcmd chooses it
    (tools/clientcmd/client_config.go): in a pod `$POD_NAMESPACE`, else the service
    account's namespace file (`inClusterClientConfig.Namespace`); from kubeconfig, the
    context's `namespace` (`DirectClientConfig.Namespace`); `default` where none is named."""
    configuration = client.Configuration()
    if kubeconfig is None and context is None:
        try:
            # kubernetes.config, unlike kubernetes.client, carries no annotations.
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return Connection(BoundedApiClient(configuration), _pod_namespace())
        except config.ConfigException:
            pass  # not in a pod: fall through to kubeconfig
    files = kubeconfig or os.environ.get("KUBECONFIG")
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]  # unannotated, as above
            config_file=files, context=context, client_configuration=configuration
        )
        contexts, current = config.list_kube_config_contexts(files)  # type: ignore[no-untyped-call]
    except (config.ConfigException, OSError) as exc:
        raise KubeConfigError(f"no Kubernetes configuration: not in a cluster and {exc}") from None
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return Connection(BoundedApiClient(configuration), str(namespace or "default"))


def _pod_namespace() -> str:
    try:
        named = os.environ.get("POD_NAMESPACE") or POD_NAMESPACE_FILE.read_text().strip()
    except OSError:
        named = ""
    return named or "default"


def core_api() -> client.CoreV1Api:
    """A CoreV1Api on `api_client()`."""
    return client.CoreV1Api(api_client())
