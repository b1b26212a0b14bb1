"""The one Kubernetes client builder: the pod's service account first, kubeconfig after.

Every command that talks to the API (`label-node`, discovery in `serve`, `python -m certs
install`) builds its client here and hands it to logic that takes it as a parameter.
"""

from __future__ import annotations

import os

from kubernetes import client, config


class KubeConfigError(RuntimeError):
    """Neither an in-cluster service account nor a usable kubeconfig was found."""


def api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """An ApiClient from the pod's service account, else from kubeconfig, as kubectl does.

    An explicit `kubeconfig` or `context` skips the in-cluster attempt. Without
    `kubeconfig`, `$KUBECONFIG` is read now (the client library reads it once, at its
    import) and then `~/.kube/config`.
    """
    configuration = client.Configuration()
    if kubeconfig is None and context is None:
        try:
            # kubernetes.config, unlike kubernetes.client, carries no annotations.
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            return client.ApiClient(configuration)
        except config.ConfigException:
            pass  # not in a pod: fall through to kubeconfig
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]  # unannotated, as above
            config_file=kubeconfig or os.environ.get("KUBECONFIG"),
            context=context,
            client_configuration=configuration,
        )
    except (config.ConfigException, OSError) as exc:
        raise KubeConfigError(f"no Kubernetes configuration: not in a cluster and {exc}") from None
    return client.ApiClient(configuration)


def core_api() -> client.CoreV1Api:
    """A CoreV1Api on `api_client()`."""
    return client.CoreV1Api(api_client())
