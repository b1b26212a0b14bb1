"""What `parse_request` says about a body that is not a v1 AdmissionReview: the apiVersion and
kind it has (never Python's `None`), the ones expected, and the fix (golden file)."""

from __future__ import annotations

import pytest

from tests.support.golden import check_golden
from tests.support.paths import REPO
from webhook.admission import BadReview, parse_request

GOLDEN = REPO / "tests" / "golden" / "cli" / "not-a-review.txt"

BODIES = {
    "neither field": {},
    "v1beta1": {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"},
    "no apiVersion": {"kind": "AdmissionReview"},
    "a Pod": {"apiVersion": "v1", "kind": "Pod"},
    "odd types": {"apiVersion": 5, "kind": ""},
}


def message(body: dict) -> str:
    with pytest.raises(BadReview) as raised:
        parse_request(body)
    return str(raised.value)


def test_messages_name_what_is_there_and_what_is_expected():
    lines = [f"{case}: {message(body)}\n" for case, body in BODIES.items()]
    assert not any("None" in line for line in lines)
    check_golden(GOLDEN, "".join(lines))
