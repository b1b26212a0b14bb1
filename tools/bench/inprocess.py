"""In-process cost of one review against the JSON floor, and its growth with containers.

One review is what a worker does between receiving the body and sending the
answer: `orjson.loads` of the raw bytes, `admission.parse_request`,
`admission.review` (decision + JSON Patch + response) and `admission.encode`.
The floor (issue 7) is `json.loads` + `json.dumps` of the same body; orjson's
own loads + dumps is shown beside it.
"""

from __future__ import annotations

import json
import math
import statistics
from functools import partial
from typing import Any

import orjson

from webhook import admission
from webhook.policy import PolicySet

from . import bodies
from .timing import interleaved

GROWTH = (1, 4, 16, 64, 256)
# A cost that grows as n^k above the 1-container cost: k = 1 is linear, 2 quadratic.
LINEAR_EXPONENT_MAX = 1.3
BIG_BODY = 1 << 20


def review_bytes(body: bytes, policies: PolicySet) -> bytes:
    """Raw AdmissionReview bytes in, response bytes out: exactly the server's work per review."""
    request = admission.parse_request(orjson.loads(body))
    return admission.encode(admission.review(request, policies, "mutate").response)


def json_floor(body: bytes) -> str:
    """The issue's floor: parse the body and serialize it again with the standard library."""
    return json.dumps(json.loads(body))


def orjson_floor(body: bytes) -> bytes:
    """The same round trip with orjson, the library the webhook uses."""
    return orjson.dumps(orjson.loads(body))


def _compare(body: bytes, policies: PolicySet, budget_s: float) -> dict[str, Any]:
    rounds = 100 if len(body) > BIG_BODY else 20000
    stats = interleaved(
        {
            "review": partial(review_bytes, body, policies),
            "json": partial(json_floor, body),
            "orjson": partial(orjson_floor, body),
        },
        budget_s=budget_s,
        max_rounds=rounds,
    )
    review = stats["review"]["median_us"]
    return {
        **stats,
        "ratio_json": round(review / stats["json"]["median_us"], 3),
        "ratio_orjson": round(review / stats["orjson"]["median_us"], 3),
    }


def cases(policies: PolicySet, budget_s: float = 3.0) -> list[dict[str, Any]]:
    """Review vs floor for each body of `bodies.cases()` (seed, 20 containers, ~3 MiB)."""
    rows = []
    for name, body in bodies.cases().items():
        request = admission.parse_request(orjson.loads(body))
        decided = admission.review(request, policies, "mutate").outcome
        rows.append(
            {
                "case": name,
                "bytes": len(body),
                "decision": decided,
                **_compare(body, policies, budget_s),
            }
        )
    return rows


def _exponent(ys: list[float]) -> float:
    """k in (cost(n) - cost(1)) ~ n^k, from the two largest sizes of `GROWTH`."""
    return math.log(max(ys[-1] - ys[0], 1e-9) / max(ys[-2] - ys[0], 1e-9)) / math.log(
        (GROWTH[-1] - 1) / (GROWTH[-2] - 1)
    )


def growth(policies: PolicySet, budget_s: float = 12.0, passes: int = 3) -> dict[str, Any]:
    """Review cost for pods of 1..256 containers, the per-container slope and a linearity check.

    Sizes are timed in blocks (mixing a 256-container review into the rounds of a
    1-container one would evict its caches), in `passes` sweeps of alternating
    direction so that load on the shared machine spreads over all sizes. Beside
    the review, `orjson.loads` alone is timed: review minus parse is the
    decision's own cost. k fits (cost(n) - cost(1)) ~ n^k between 64 and 256
    containers: about 1 for linear growth, 2 for quadratic. Above L2 cache
    sizes even parsing shows k a little over 1, so both are reported.
    """
    sized = {count: bodies.body(bodies.pod_with_containers(count)) for count in GROWTH}
    samples: dict[int, list[dict[str, Any]]] = {count: [] for count in GROWTH}
    for sweep in range(passes):
        for count in GROWTH if sweep % 2 == 0 else GROWTH[::-1]:
            body = sized[count]
            samples[count].append(
                interleaved(
                    {
                        "review": partial(review_bytes, body, policies),
                        "parse": partial(orjson.loads, body),
                        "json": partial(json_floor, body),
                        "orjson": partial(orjson_floor, body),
                    },
                    budget_s=budget_s / passes / len(GROWTH),
                    max_rounds=20000,
                )
            )
    points = []
    for count, body in sized.items():
        point: dict[str, Any] = {"containers": count, "bytes": len(body)}
        for name in ("review", "parse", "json", "orjson"):
            point[name] = {
                "median_us": round(
                    statistics.median(s[name]["median_us"] for s in samples[count]), 2
                )
            }
        point["decision"] = {
            "median_us": round(point["review"]["median_us"] - point["parse"]["median_us"], 2)
        }
        point["ratio_json"] = round(point["review"]["median_us"] / point["json"]["median_us"], 3)
        points.append(point)
    fits = {}
    for name in ("review", "decision", "json", "orjson"):
        ys = [p[name]["median_us"] for p in points]
        slope, intercept = statistics.linear_regression(GROWTH, ys)
        fits[name] = {
            "us_per_container": round(slope, 3),
            "intercept_us": round(intercept, 2),
            "exponent": round(_exponent(ys), 3),
        }
    return {
        "points": points,
        "fits": fits,
        "linear": fits["decision"]["exponent"] <= LINEAR_EXPONENT_MAX,
    }
