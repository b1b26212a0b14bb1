"""The run order of interleaved rounds and the ratios reported from them."""

from __future__ import annotations

import pytest

from tools.bench import rounds


@pytest.mark.parametrize(
    ("round_", "order"),
    [
        (0, ["none", "lwgpu", "go", "map"]),
        (1, ["lwgpu", "go", "map", "none"]),
        (3, ["map", "none", "lwgpu", "go"]),
        (4, ["none", "lwgpu", "go", "map"]),
    ],
)
def test_each_round_starts_one_further(round_: int, order: list[str]) -> None:
    assert rounds.rotated(["none", "lwgpu", "go", "map"], round_) == order


def test_no_names_no_order() -> None:
    assert rounds.rotated([], 2) == []


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        (11.2, 8.9, 1.258),
        (1.0, 2.0, 0.5),
        # An added latency lost in the noise: no ratio rather than a huge or negative one.
        (3.0, 0.0, None),
        (3.0, -0.4, None),
    ],
)
def test_ratio(ours: float, theirs: float, expected: float | None) -> None:
    assert rounds.ratio(ours, theirs) == expected


def test_added_is_per_round_over_the_baseline() -> None:
    assert rounds.added([12.0, 15.5, 9.0], [2.0, 3.0, 9.5]) == [10.0, 12.5, -0.5]


def test_added_needs_a_baseline_for_each_round() -> None:
    with pytest.raises(ValueError):
        rounds.added([1.0, 2.0], [1.0])


@pytest.mark.parametrize(
    ("ours", "theirs", "medians", "each", "range_"),
    [
        ([10.0, 30.0, 20.0], [10.0, 10.0, 20.0], 2.0, [1.0, 3.0, 1.0], (1.0, 3.0)),
        ([4.0, 6.0], [2.0, 0.0], 5.0, [2.0, None], (2.0, 2.0)),
        ([4.0], [0.0], None, [None], None),
    ],
)
def test_ratio_of_medians_and_each_rounds_range(
    ours: list[float],
    theirs: list[float],
    medians: float | None,
    each: list[float | None],
    range_: tuple[float, float] | None,
) -> None:
    assert rounds.of_medians(ours, theirs) == medians
    assert rounds.per_round(ours, theirs) == each
    assert rounds.span(each) == range_


def test_no_rounds_no_ratio() -> None:
    assert rounds.of_medians([], [1.0]) is None
