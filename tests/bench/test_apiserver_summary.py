"""A level's runs summed up: what each variant adds over no webhook, round by round, lwgpu's
ratios to the Go webhook, and issue 30's targets read from them."""

from __future__ import annotations

import math
from typing import Any

from tools.bench import apiserver, report_apiserver
from tools.bench.histogram import Histogram


def _run(p50: float, p99: float, span: float = 3.0, failed: int = 0) -> dict[str, Any]:
    return {
        "creates": 300,
        "failed": failed,
        "unrewritten": 0,
        "span_s": span,
        "p50_ms": p50,
        "p99_ms": p99,
        "p999_ms": p99,
        "errors": ["timeout"] if failed else [],
    }


def _level(burst: bool, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    seen = {name: {"webhook": Histogram(), "admit": Histogram({math.inf: 0})} for name in runs}
    pooled = {name: [1.0, 2.0, 3.0] for name in runs}
    level = apiserver.Level(burst, 300 if burst else 100)
    return apiserver.level_result(level, runs, pooled, seen)


RATE = {
    "none": [_run(4, 10), _run(6, 20), _run(5, 12)],
    "lwgpu": [_run(9, 21), _run(10, 30), _run(9, 25)],
    "go": [_run(8, 20), _run(10, 29), _run(7, 20)],
}


def test_added_is_each_rounds_difference_to_no_webhook() -> None:
    lwgpu = _level(False, RATE)["variants"]["lwgpu"]
    assert lwgpu["added_ms"] == {"p50": [5, 4, 4], "p99": [11, 10, 13]}
    assert lwgpu["added_median_ms"] == {"p50": 4, "p99": 11}
    assert "added_ms" not in _level(False, RATE)["variants"]["none"]


def test_lwgpu_over_go_is_the_ratio_of_medians_and_each_rounds_range() -> None:
    over = _level(False, RATE)["lwgpu_over"]["go"]
    # go adds p50 [4, 4, 2]: median 4; lwgpu's median 4.
    assert over["added_p50"]["of_medians"] == 1.0
    assert over["added_p50"]["rounds"] == [1.25, 1.0, 2.0]
    assert over["added_p50"]["range"] == (1.0, 2.0)
    assert "burst_time" not in over


def test_the_floor_is_compared_with_go_and_lwgpu_with_the_floor() -> None:
    runs = {**RATE, "floor": [_run(7, 18), _run(8, 26), _run(6, 14)]}
    level = _level(False, runs)
    # floor adds p50 [3, 2, 1] (median 2); go [4, 4, 2] (median 4); lwgpu [5, 4, 4] (median 4).
    assert level["floor_over"]["go"]["added_p50"]["of_medians"] == 0.5
    assert level["lwgpu_over"]["floor"]["added_p50"]["of_medians"] == 2.0
    assert set(level["lwgpu_over"]) == {"floor", "go"}


def test_a_burst_also_compares_the_time_it_took() -> None:
    runs = {
        "none": [_run(4, 10, span=1.0), _run(4, 10, span=1.2)],
        "lwgpu": [_run(9, 20, span=3.0), _run(9, 20, span=2.0)],
        "go": [_run(8, 19, span=2.0), _run(8, 19, span=2.0)],
    }
    over = _level(True, runs)["lwgpu_over"]["go"]
    assert over["burst_time"]["rounds"] == [1.5, 1.0]
    assert over["burst_time"]["of_medians"] == 1.25


def test_targets_read_the_rate_and_the_burst_and_count_failures() -> None:
    rate = _level(False, RATE)
    burst = _level(
        True,
        {
            "none": [_run(4, 10, span=1.0)],
            "lwgpu": [_run(9, 20, span=3.0, failed=2)],
            "go": [_run(8, 19, span=2.0)],
        },
    )
    checks = {c["target"]: c for c in report_apiserver.targets({"levels": [rate, burst]})}
    assert checks["added p50 at 100/s ≤ 1.1× Go's"]["met"] is True
    # go adds p99 [10, 9, 8] (median 9), lwgpu [11, 10, 13] (median 11): 1.22×
    assert checks["added p99 at 100/s ≤ 1.1× Go's"]["measured"] == "1.22×"
    assert checks["added p99 at 100/s ≤ 1.1× Go's"]["met"] is False
    assert checks["burst of 300 ≤ 1.25× Go's time"]["measured"] == "1.50×"
    assert checks["0 failed or unrewritten creates"] == {
        "target": "0 failed or unrewritten creates",
        "measured": 2,
        "met": False,
    }


def test_the_section_renders_every_level() -> None:
    result = {
        "repeats": 3,
        "seconds": 15,
        "workers": 2,
        "threads": 8,
        "skipped": {"go": "go is not installed"},
        "levels": [_level(False, RATE)],
    }
    text = "\n".join(report_apiserver.section(result))
    assert "#### 100/s" in text
    assert "Skipped: go: go is not installed" in text
    assert "lwgpu / Go webhook: added p50 **1.00×** (rounds 1.00–2.00)" in text
