"""What a well-formed answer to an AdmissionReview is, checked with assertions.

Shared by the fuzz tests and the adversarial-pod tests: `checked_review` runs the decode
and review steps the server and the CLI use, and asserts everything a caller (the
apiserver, a person reading kubectl's output) relies on.
"""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any

import jsonpatch
import orjson

from tests.support.policies import default_policies
from webhook.admission import (
    API_VERSION,
    KIND,
    BadReview,
    ReviewResult,
    encode,
    parse_request,
    review,
)
from webhook.api.text import WARNING_LIMIT

# A denial is read by a person in kubectl's output: it names fields and values, shortened.
MESSAGE_LIMIT = 1024
DECISIONS = {"skipped", "allowed", "mutated", "denied"}


def patch_of(result: ReviewResult) -> list[dict[str, Any]]:
    """The JSON Patch operations of an answer (empty when it has none)."""
    answer = result.response["response"]
    if "patch" not in answer:
        return []
    operations: list[dict[str, Any]] = orjson.loads(base64.b64decode(answer["patch"]))
    return operations


def checked_review(body: object, mutate: bool = True) -> ReviewResult | None:
    """Review `body` under the shipped policy and assert the answer is well-formed.

    None when the body is refused as not an AdmissionReview (`BadReview`, HTTP 400). For a
    patch: it applies to the request's object, yields the decision's object, and reviewing
    the result again asks for no further change (the apiserver may reinvoke the webhook).
    """
    try:
        request = parse_request(body)
    except BadReview as exc:
        assert 0 < len(str(exc)) <= MESSAGE_LIMIT
        return None
    result = review(request, default_policies(), "mutate" if mutate else "validate")
    assert result.response.keys() == {"apiVersion", "kind", "response"}
    assert (result.response["apiVersion"], result.response["kind"]) == (API_VERSION, KIND)
    answer = result.response["response"]
    assert answer["uid"] == request["uid"]
    assert answer["allowed"] is (result.outcome != "denied")
    assert result.outcome in DECISIONS
    assert all(isinstance(w, str) and len(w) <= WARNING_LIMIT for w in answer.get("warnings", []))
    if result.outcome == "denied":
        assert answer["status"]["code"] == 403
        assert 0 < len(answer["status"]["message"]) <= MESSAGE_LIMIT
    if "patch" in answer:
        assert mutate and answer["patchType"] == "JSONPatch"
        patched = jsonpatch.apply_patch(request["object"], patch_of(result))
        assert json.dumps(patched, sort_keys=True) == json.dumps(
            result.decision.obj, sort_keys=True
        )
        again = review({**request, "object": patched}, default_policies(), "mutate")
        assert "patch" not in again.response["response"], "a rewritten object must stay put"
    with contextlib.suppress(orjson.JSONEncodeError):
        orjson.dumps(body)  # only a body that could arrive as JSON must encode (no 2**70 uids)
        encode(result.response)
    return result
