"""Prometheus histograms read from a component's /metrics text: bucket deltas and quantiles.

kube-apiserver's admission histograms are cumulative since it started; the requests of one
run are the difference of two scrapes, one before and one after. Their quantile is what
PromQL's `histogram_quantile` computes (linear within the bucket that holds the rank; in the
+Inf bucket, the largest finite bound), so it is only as fine as the buckets. Only the lines
of the named histogram are parsed: the apiserver's text is megabytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Histogram:
    """Cumulative counts by upper bound (`le`), with the sum of the observations."""

    buckets: dict[float, float] = field(default_factory=dict)
    total: float = 0.0

    @property
    def count(self) -> float:
        """Observations in all (the +Inf bucket)."""
        return self.buckets.get(math.inf, 0.0)

    def minus(self, before: Histogram) -> Histogram:
        """The observations made since `before` was read."""
        return Histogram(
            {le: n - before.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            self.total - before.total,
        )

    def plus(self, other: Histogram) -> Histogram:
        """The observations of both (two runs pooled)."""
        bounds = self.buckets.keys() | other.buckets.keys()
        return Histogram(
            {le: self.buckets.get(le, 0.0) + other.buckets.get(le, 0.0) for le in bounds},
            self.total + other.total,
        )

    def mean(self) -> float | None:
        """The exact mean of the observations (sum / count); None without any."""
        return self.total / self.count if self.count else None

    def quantile(self, q: float) -> float | None:
        """`histogram_quantile(q)` of these buckets; None without observations."""
        if not self.count:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        for le in sorted(self.buckets):
            cumulative = self.buckets[le]
            if cumulative >= rank:
                if math.isinf(le):
                    return lower
                inside = cumulative - below
                return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
            lower, below = le, cumulative
        return lower


def _labels(text: str) -> dict[str, str]:
    return dict(_LABEL.findall(text))


def read(text: str, name: str, match: Mapping[str, str]) -> Histogram:
    """Histogram `name` summed over its series whose labels include `match`."""
    buckets: dict[float, float] = {}
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or "{" not in line:
            continue
        metric, rest = line.split("{", 1)
        labels_text, _, value_text = rest.rpartition("}")
        labels = _labels(labels_text)
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        value = float(value_text.split()[0])
        if metric == name + "_bucket":
            le = float(labels["le"])  # "+Inf" parses as inf
            buckets[le] = buckets.get(le, 0.0) + value
        elif metric == name + "_sum":
            total += value
    return Histogram(buckets, total)
