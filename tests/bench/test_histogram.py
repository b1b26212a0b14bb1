"""Histograms read from /metrics text: the series chosen, deltas and histogram_quantile."""

from __future__ import annotations

import math

import pytest

from tools.bench.histogram import Histogram, read

NAME = "apiserver_admission_webhook_admission_duration_seconds"


def _text(create: list[float], update: float, total: float) -> str:
    bounds = ["0.005", "0.025", "0.1", "+Inf"]
    lines = [f"# HELP {NAME} Admission webhook latency.", f"# TYPE {NAME} histogram"]
    for le, n in zip(bounds, create, strict=True):
        for rejected, share in (("false", n - 1), ("true", 1)):
            lines.append(
                f'{NAME}_bucket{{name="mutate.lwgpu.io",operation="CREATE",'
                f'rejected="{rejected}",type="admit",le="{le}"}} {share}'
            )
        lines.append(
            f'{NAME}_bucket{{name="x",operation="UPDATE",type="admit",le="{le}"}} {update}'
        )
    lines += [
        f'{NAME}_sum{{name="mutate.lwgpu.io",operation="CREATE",rejected="false",type="admit"}} '
        f"{total}",
        f'{NAME}_count{{name="mutate.lwgpu.io",operation="CREATE",rejected="false",type="admit"}} '
        f"{create[-1]}",
        f'{NAME}_other_bucket{{operation="CREATE",le="+Inf"}} 99',
    ]
    return "\n".join(lines) + "\n"


def test_series_that_match_are_summed_and_others_ignored() -> None:
    found = read(_text([2, 5, 9, 10], 7, 0.25), NAME, {"operation": "CREATE"})
    assert found.buckets == {0.005: 2, 0.025: 5, 0.1: 9, math.inf: 10}
    assert found.count == 10
    assert found.total == 0.25


def test_a_run_is_the_difference_of_two_scrapes() -> None:
    before = read(_text([2, 5, 9, 10], 7, 0.25), NAME, {"operation": "CREATE"})
    after = read(_text([2, 25, 109, 110], 70, 5.25), NAME, {"operation": "CREATE"})
    run = after.minus(before)
    assert run.buckets == {0.005: 0, 0.025: 20, 0.1: 100, math.inf: 100}
    assert run.mean() == pytest.approx(0.05)


def test_runs_pool_by_adding_their_buckets() -> None:
    one = Histogram({0.005: 1, 0.025: 3, math.inf: 4}, 0.04)
    two = Histogram({0.005: 0, 0.025: 2, math.inf: 2}, 0.1)
    pooled = one.plus(two)
    assert pooled.buckets == {0.005: 1, 0.025: 5, math.inf: 6}
    assert pooled.total == pytest.approx(0.14)


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        # rank 5 of 100: half of the 10 in (0, 0.005]
        (0.05, 0.0025),
        (0.1, 0.005),
        # rank 30: 20 of the 40 in (0.005, 0.025]
        (0.3, 0.015),
        # rank 70: 20 of the 40 in (0.025, 0.1]
        (0.7, 0.0625),
        # rank 99: in the +Inf bucket, so the largest finite bound (histogram_quantile)
        (0.99, 0.1),
    ],
)
def test_quantile_interpolates_in_its_bucket(q: float, expected: float) -> None:
    histogram = Histogram({0.005: 10, 0.025: 50, 0.1: 90, math.inf: 100})
    assert histogram.quantile(q) == pytest.approx(expected)


def test_no_observations_no_quantile_or_mean() -> None:
    empty = Histogram({0.005: 0, math.inf: 0})
    assert empty.quantile(0.5) is None
    assert empty.mean() is None
