"""`policy sync` where no API server can be had: no configuration at all (exit 2 before it
starts following anything), and an address nothing listens on (the applier's error names
the server and the cause in a few words). The loop on a real apiserver is in
test_final_state_sync.py.
"""

from __future__ import annotations

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.paths import SHIPPED_POLICY
from tools.cluster.processes import free_port
from webhook.compile import final_state_check
from webhook.files import load_policies
from webhook.kube import admission_policies
from webhook.kube.client import api_client


def test_without_any_api_configuration_it_exits_2(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))

    code, out, err = run_cli("policy", "sync", "--policies", str(SHIPPED_POLICY))

    assert (code, out) == (2, "")
    assert err.startswith("python -m webhook policy sync: error: no Kubernetes configuration:")


def test_an_unreachable_api_server_is_named_with_the_cause(tmp_path):
    server = f"https://127.0.0.1:{free_port()}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    api = api_client(kubeconfig=str(kubeconfig))
    api.configuration.retries = 0  # urllib3's own three retries would only make it slower

    with pytest.raises(admission_policies.PatchError) as failed:
        admission_policies.patch_objects(api, final_state_check(load_policies(SHIPPED_POLICY)))

    assert str(failed.value) == f"cannot reach the API server {server}: connection refused"
