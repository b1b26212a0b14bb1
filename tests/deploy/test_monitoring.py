"""Every metric the monitoring assets query exists in `/metrics` of a running server.

The PrometheusRule (deploy/components/monitoring/prometheusrule.yaml) and the Grafana
dashboard (deploy/components/monitoring/lwgpu-dashboard.json) name `lwgpu_` series in PromQL; a
renamed or removed metric would silently turn an alert into one that never fires. The names are
read out of every expression and checked against the sample names a real `webhook serve`
exposes after one review (labelled counters and histograms only have samples once a label set
is used).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.support.builders import admission_review, gpu_pod
from tests.support.paths import DEPLOY, SHIPPED_POLICY
from tools.loopback.server import serving

MONITORING = DEPLOY / "components" / "monitoring"
# A PromQL metric name: lwgpu_ then name characters (labels, functions and ranges never match).
METRIC = re.compile(r"\blwgpu_[A-Za-z0-9_]+")


def rule_expressions() -> dict[str, str]:
    """alert name -> expr of the PrometheusRule."""
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}


def dashboard_expressions() -> dict[str, str]:
    """'panel title #n' -> expr of every target of the Grafana dashboard."""
    board = json.loads((MONITORING / "lwgpu-dashboard.json").read_text())
    return {
        f"{panel['title']} #{n}": target["expr"]
        for panel in board["panels"]
        for n, target in enumerate(panel.get("targets", []))
    }


QUERIES = {
    **{f"PrometheusRule {k}": v for k, v in rule_expressions().items()},
    **{f"dashboard {k}": v for k, v in dashboard_expressions().items()},
}


def test_every_asset_queries_something() -> None:
    """Each alert and panel expression names at least one lwgpu_ metric, except the `up` probe."""
    assert len(rule_expressions()) == 6
    assert dashboard_expressions()
    blind = [k for k, e in QUERIES.items() if not METRIC.search(e) and "up{" not in e]
    assert blind == []


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The sample names of a real server's /metrics after one mutated review and one error."""
    workdir: Path = tmp_path_factory.mktemp("monitoring")
    with serving(workdir, SHIPPED_POLICY) as server:
        status, _ = server.review("/mutate", admission_review(gpu_pod({"aliyun.com/gpu-mem": "2"})))
        assert status == 200
        conn = server.connect()
        status, _, _ = conn.call(
            "POST", "/mutate", b"not json", {"Content-Type": "application/json"}
        )
        conn.close()
        assert status == 400
        return {name for name, _labels in server.metrics()}


@pytest.mark.parametrize("where", sorted(QUERIES))
def test_queried_metric_is_exposed(where: str, exposed: set[str]) -> None:
    """The metrics this expression queries are all in /metrics."""
    missing = sorted(set(METRIC.findall(QUERIES[where])) - exposed)
    assert missing == [], f"{where} queries {missing}, not in /metrics: {sorted(exposed)}"
