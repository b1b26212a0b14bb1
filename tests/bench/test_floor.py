"""The floor answers what lwgpu answers, under each request's uid, without deciding anything."""

from __future__ import annotations

import io
from typing import Any

import orjson

from tools.bench import bodies, lineup, noop
from webhook import DEFAULT_POLICIES, admission
from webhook.files import load_policies


def _call(app: Any, body: bytes) -> bytes:
    environ = {
        "PATH_INFO": "/mutate",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    statuses: list[str] = []
    answer = b"".join(app(environ, lambda status, headers: statuses.append(status)))
    assert statuses == ["200 OK"]
    return answer


def test_the_floor_answers_lwgpus_answer_under_the_requests_uid() -> None:
    policies = load_policies(DEFAULT_POLICIES)
    answer = lineup.answer_to(bodies.seed_pod(), "bench-floor", policies)
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
    review = bodies.review(bodies.seed_pod(), "bench-floor")
    review["request"]["uid"] = "0a1b2c3d-0000-4000-8000-00000000f100"
    body = orjson.dumps(review)
    lwgpu = admission.review(admission.parse_request(review), policies, "mutate")
    floor = orjson.loads(_call(lambda e, s: noop.bare_app(e, s, answer=answer), body))
    assert floor == orjson.loads(admission.encode(lwgpu.response))
    assert floor["response"]["uid"] == "0a1b2c3d-0000-4000-8000-00000000f100"
