"""Issue 30's targets for a replica and the Node inventory, read from a run's results."""

from __future__ import annotations

from typing import Any

import pytest

from tools.bench.report_replica import targets


def _inventory(idle: float, loaded: float) -> dict[str, Any]:
    return {
        "rows": [
            {"nodes": 0, "memory": {"worker_rss_mib": [idle, idle - 1]}},
            {"nodes": 15_000, "memory": {"worker_rss_mib": [loaded - 2, loaded]}},
        ]
    }


@pytest.mark.parametrize(
    ("results", "measured", "met"),
    [
        (
            {
                "memory": {
                    "samples": [
                        {"reviews": 0, "rss_mib": 90},
                        {"reviews": 50_000, "rss_mib": 110.0},
                    ]
                }
            },
            "110.0 MiB",
            True,
        ),
        ({"memory": {"samples": [{"reviews": 50_000, "rss_mib": 117.2}]}}, "117.2 MiB", False),
        ({"startup": {"variants": {"checkout": {"median_s": 1.2}}}}, "1.2 s", True),
        ({"startup": {"variants": {"checkout": {"median_s": 2.19}}}}, "2.19 s", False),
        ({"inventory": _inventory(80.6, 110.6)}, "+30.0 MiB", True),
        ({"inventory": _inventory(80.6, 157.0)}, "+76.4 MiB", False),
    ],
)
def test_each_target_reads_its_part(results: dict[str, Any], measured: str, met: bool) -> None:
    (check,) = targets(results)
    assert (check["measured"], check["met"]) == (measured, met)


def test_parts_not_run_have_no_targets() -> None:
    assert targets({"inventory": {"rows": [{"nodes": 500, "memory": {}}]}}) == []
