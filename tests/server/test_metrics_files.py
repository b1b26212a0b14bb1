"""/metrics while a worker creates its metric files: never a 500.

A booting worker creates each prometheus-client file empty and sizes it a moment later; a
scrape in between read 0 bytes and answered 500 (`struct.error`), as the fault suite's
worker restarts showed (issue 28). The test leaves a file in exactly that state.
"""

from __future__ import annotations

from tests.support.paths import REPO
from tools.loopback.server import serving

POLICY = REPO / "policies" / "default.yaml"


def test_metrics_answer_while_a_worker_file_is_still_empty(tmp_path):
    metrics_dir = tmp_path / "metrics"
    env = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    with serving(tmp_path, POLICY, workers=1, threads=2, env=env) as server:
        (metrics_dir / "counter_4242.db").touch()  # a worker between open and truncate
        status, data = server.get("/metrics")
        assert status == 200, data
        assert b"lwgpu_policy_reloads_total 1.0" in data
