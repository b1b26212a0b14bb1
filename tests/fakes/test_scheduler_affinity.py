"""The node affinity double against the cases nodeaffinity_test.go encodes."""

import pytest

from tests.fakes.scheduler_affinity import REQUIRED, schedulable

LABELS = {"zone": "a", "gpus": "4"}


def required(*terms):
    return {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}}


@pytest.mark.parametrize(
    ("spec", "fits"),
    [
        ({}, True),
        ({"nodeSelector": {"zone": "a"}}, True),
        ({"nodeSelector": {"zone": "b"}}, False),
        (
            required({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}),
            True,
        ),
        (
            required({"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["a"]}]}),
            True,
        ),
        (
            required({"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["3"]}]}),
            True,
        ),
        (
            required({"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["3"]}]}),
            False,
        ),
        (required({}), False),  # an empty term matches no node
        (required(), False),  # no terms: nothing matches
        (
            required(
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ),
            True,
        ),
        (
            required(
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                {"matchExpressions": [{"key": "gpus", "operator": "Exists"}]},
            ),
            True,
        ),
    ],
)
def test_schedulable(spec, fits):
    assert schedulable(spec, "n1", LABELS) is fits


def test_an_operator_validation_refuses_is_an_error():
    spec = required({"matchExpressions": [{"key": "zone", "operator": "Equals", "values": ["a"]}]})
    with pytest.raises(ValueError, match="Equals"):
        schedulable(spec, "n1", LABELS)
