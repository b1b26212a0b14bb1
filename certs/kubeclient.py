"""Building the Kubernetes client for the CLI: in-cluster service account first, kubeconfig after.

Only the CLI calls this; the installer logic takes the client it is given.
"""

from __future__ import annotations

from kubernetes import config
from kubernetes.client import ApiClient, Configuration

from .errors import CertError


def build_api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """An ApiClient from the pod's service account, else from ``kubeconfig``.

    Without ``kubeconfig`` the usual kubeconfig search applies ($KUBECONFIG, ~/.kube/config).

    An explicit ``kubeconfig`` or ``context`` skips the in-cluster attempt.
    """
    configuration = Configuration()
    if kubeconfig is None and context is None:
        try:
            config.load_incluster_config(client_configuration=configuration)
            return ApiClient(configuration)
        except config.ConfigException:
            pass  # not in a pod: fall through to kubeconfig, as kubectl does
    try:
        config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    except (config.ConfigException, OSError) as exc:
        raise CertError(f"no Kubernetes configuration: not in a cluster and {exc}") from None
    return ApiClient(configuration)
