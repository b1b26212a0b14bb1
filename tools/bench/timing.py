"""Interleaved timing of a few functions, and the statistics the tables report.

The machine is shared and noisy, so the functions compared are called in turn
within each round (the order rotating): a burst of load slows all of them alike,
and their ratio stays meaningful even when the absolute numbers move.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .rounds import rotated


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (`fraction` 0.99 for p99) of `values`."""
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[rank]


def summary(samples_ns: list[int]) -> dict[str, Any]:
    """Median, p99 and count of samples in nanoseconds, as microseconds."""
    micros = [s / 1000 for s in samples_ns]
    return {
        "median_us": round(statistics.median(micros), 2),
        "p99_us": round(percentile(micros, 0.99), 2),
        "n": len(micros),
    }


def interleaved(
    functions: dict[str, Callable[[], object]],
    *,
    budget_s: float,
    max_rounds: int,
    min_rounds: int = 5,
    warmup: int = 3,
) -> dict[str, dict[str, Any]]:
    """Call every function once per round, rotating the order, and time each call.

    Stops after `max_rounds` rounds or `budget_s` seconds, whichever comes first
    (but not before `min_rounds`). Returns `summary` per function name.
    """
    names = list(functions)
    for _ in range(warmup):
        for name in names:
            functions[name]()
    samples: dict[str, list[int]] = {name: [] for name in names}
    clock = time.perf_counter_ns
    deadline = time.monotonic() + budget_s
    for round_ in range(max_rounds):
        if round_ >= min_rounds and time.monotonic() > deadline:
            break
        for name in rotated(names, round_):
            call = functions[name]
            start = clock()
            call()
            samples[name].append(clock() - start)
    return {name: summary(values) for name, values in samples.items()}


def steadiness(rounds: int = 12, pause_s: float = 0.25, work: int = 400_000) -> dict[str, Any]:
    """How steady the CPU is: the same fixed loop timed `rounds` times, `pause_s` apart.

    On a quiet machine of its own the times agree within a few percent; on a shared
    virtual machine they can differ by half. The report prints the spread beside the
    numbers it qualifies.
    """
    times_ms = []
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for value in range(work):
            total += value
        times_ms.append((time.perf_counter() - start) * 1000)
        time.sleep(pause_s)
    fastest = min(times_ms)
    return {
        "loop_ms_min": round(fastest, 1),
        "loop_ms_median": round(statistics.median(times_ms), 1),
        "loop_ms_max": round(max(times_ms), 1),
        "spread_pct": round(100 * (max(times_ms) - fastest) / fastest),
    }
