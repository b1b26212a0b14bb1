"""Statistics of interleaved rounds: the run order, and ratios that survive a noisy machine.

Variants run back to back within a round, in an order that rotates between rounds, so load
from elsewhere on the shared machine hits all of them alike. A figure is compared round by
round (each round's ratio, whose range is the error bar) and as the ratio of the medians
over rounds. A ratio whose denominator is not above zero (an added latency lost in the
noise) has no meaning and is left out, as None.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def rotated(names: Sequence[T], round_: int) -> list[T]:
    """`names` in the order of round `round_`: shifted left by one each round."""
    if not names:
        return []
    shift = round_ % len(names)
    return [*names[shift:], *names[:shift]]


def ratio(ours: float, theirs: float) -> float | None:
    """`ours / theirs` to three places, or None when `theirs` is not above zero."""
    return round(ours / theirs, 3) if theirs > 0 else None


def added(values: Sequence[float], baseline: Sequence[float]) -> list[float]:
    """Each round's value less the baseline's in the same round."""
    return [round(v - b, 3) for v, b in zip(values, baseline, strict=True)]


def per_round(ours: Sequence[float], theirs: Sequence[float]) -> list[float | None]:
    """Each round's ratio `ours / theirs`."""
    return [ratio(a, b) for a, b in zip(ours, theirs, strict=True)]


def of_medians(ours: Sequence[float], theirs: Sequence[float]) -> float | None:
    """The median of `ours` over the median of `theirs`."""
    if not ours or not theirs:
        return None
    return ratio(statistics.median(ours), statistics.median(theirs))


def span(values: Sequence[float | None]) -> tuple[float, float] | None:
    """The smallest and largest of the ratios that have a meaning; None when none has."""
    known = [v for v in values if v is not None]
    return (min(known), max(known)) if known else None
