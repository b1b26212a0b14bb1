"""The CEL double evaluates matchConditions as kube-apiserver's cel-go does, and gives its verdict.

has(e.f) as cel-go's interpreter/attributes.go evaluates it (`refQualify` with a presence test:
a missing map key is false, an erroring e is has()'s error, a list takes "f" as an index and
fails, null and scalars answer false); selection of a missing key is an error (cel-spec
tests/simple/testdata/fields.textproto, "map_field_select_no_such_key"); && / || and the
exists / all macros absorb errors as the spec's logical operators do (langdef.md, "Logical
Operators"; macros.textproto "list_elem_mixed_type_exists"); the verdict over several
conditions is webhook/matchconditions/matcher.go `Match`.
"""

import copy

import celpy
import pytest

from tests.fakes.apiserver_cel import as_apiserver_sees, bindings, match_conditions, program

ERROR = "error"
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team-a"},
    "spec": {
        "nodeName": None,  # JSON null: decoded into the Go struct, an absent field
        "containers": [
            {"name": "cpu"},
            {"name": "gpu", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
        ],
    },
}
LABELLED = {**POD, "metadata": {**POD["metadata"], "labels": {"app": "x"}}}
UNLABELLED = {**POD, "metadata": {**POD["metadata"], "labels": {}}}
CPU_ONLY = {**POD, "spec": {"containers": [{"name": "cpu"}]}}
REQUEST = {"operation": "CREATE", "namespace": "team-a", "object": POD, "oldObject": None}


def evaluate(expression: str, obj: dict, old: dict | None = None):
    """The value of `expression` for a CREATE of `obj`, or ERROR where cel-go gives an error."""
    try:
        value = program(expression).evaluate(bindings(obj, old, {**REQUEST, "object": obj}))
    except celpy.CELEvalError:
        return ERROR
    return ERROR if isinstance(value, celpy.CELEvalError) else value


# (expression, object, cel-go's value, what it shows)
EXPRESSIONS = [
    ("has(object.metadata.labels)", POD, False, "missing map key: false"),
    ("has(object.metadata.labels)", LABELLED, True, "present map key: true"),
    ("has(object.metadata.labels.app)", POD, ERROR, "e of has(e.f) errors: has() errors"),
    ("has(object.metadata.labels.app)", UNLABELLED, False, "e is a map without f: false"),
    ("has(object.metadata.labels.app)", LABELLED, True, "e is a map with f: true"),
    ("has(object.spec.containers.name)", POD, ERROR, "e is a list: f is no index"),
    ("has(object.metadata.name.first)", POD, False, "e is a string: refQualify's default"),
    ("has(oldObject.metadata)", POD, False, "e is null (oldObject on CREATE)"),
    ("has(object.spec.containers[0].resources.limits)", POD, ERROR, "indexed, then missing"),
    ("has(object.spec.nodeName)", POD, False, "a JSON null field is absent"),
    ("object.metadata.labels.app == 'x'", POD, ERROR, "select on a missing key"),
    ("'app' in object.metadata.labels", POD, ERROR, "`in` on a missing key"),
    ("object.metadata.labels.app == 'x'", LABELLED, True, "select on a present key"),
    ("has(object.metadata.labels) && has(object.metadata.labels.app)", POD, False, "&& guards"),
    ("!has(object.metadata.labels) || object.metadata.labels.app == 'y'", POD, True, "|| guards"),
    ("object.metadata.labels.app == 'x' && false", POD, False, "error && false is false"),
    ("object.metadata.labels.app == 'x' || true", POD, True, "error || true is true"),
    ("object.spec.containers.exists(c, has(c.resources.limits))", POD, True, "exists: err||true"),
    ("object.spec.containers.all(c, has(c.resources.limits))", POD, ERROR, "all: err && true"),
    ("object.spec.containers.exists(c, has(c.resources.limits))", CPU_ONLY, ERROR, "macro body"),
    (
        "object.spec.containers.exists(c, has(c.resources) && has(c.resources.limits))",
        CPU_ONLY,
        False,
        "guarded in the macro body",
    ),
    ("oldObject == null", POD, True, "oldObject is null on CREATE"),
    ("request.operation == 'CREATE' && request.namespace == 'team-a'", POD, True, "request"),
]


@pytest.mark.parametrize(
    ("expression", "obj", "expected"),
    [case[:3] for case in EXPRESSIONS],
    ids=[case[3] for case in EXPRESSIONS],
)
def test_expressions_evaluate_as_cel_go(expression, obj, expected):
    assert evaluate(expression, obj) == expected


GOOD, BAD = "has(object.metadata)", "object.metadata.labels.app == 'x'"
NO, OTHER_BAD = "has(object.metadata.labels)", "object.spec.missing == 1"

# (conditions, verdict): None calls the webhook, "skip" does not, an error text means the
# apiserver applies failurePolicy (Fail refuses, Ignore skips: the harness does the rest).
VERDICTS = [
    ([], None),
    ([GOOD], None),
    ([GOOD, GOOD], None),
    ([NO], "skip"),
    ([GOOD, NO], "skip"),
    ([BAD, NO], "skip"),  # "If any condition false, skip calling webhook always"
    ([NO, BAD], "skip"),
    ([GOOD, BAD], "matchCondition 'c1'"),  # "mix of true and eval errors": failurePolicy
    ([BAD, OTHER_BAD], "matchCondition 'c0'"),
    # cel-go rejects a non-bool expression when the configuration is written (plugin/cel
    # compile.go: "must evaluate to bool"); here it is an error, never a call.
    (["object.metadata.name"], "matchCondition 'c0'"),
]


@pytest.mark.parametrize(("expressions", "verdict"), VERDICTS)
def test_the_verdict_over_conditions_is_the_matchers(expressions, verdict):
    conditions = [{"name": f"c{i}", "expression": e} for i, e in enumerate(expressions)]
    got = match_conditions(conditions, bindings(POD, None, REQUEST))
    if verdict is None or verdict == "skip":
        assert got == verdict
    else:
        assert got is not None and got != "skip" and got.startswith(verdict)


def test_every_erroring_condition_is_named():
    conditions = [{"name": "first", "expression": BAD}, {"name": "second", "expression": BAD}]
    got = match_conditions(conditions, bindings(POD, None, REQUEST))
    assert "'first'" in got and "'second'" in got


# (value as sent, as the apiserver's CEL sees it): decoded into Go structs and converted back
# to unstructured, a null field is gone and a null list item is the zero value.
SEEN = [
    ({"a": None, "b": 1}, {"b": 1}),
    ({"a": {"b": None, "c": [None, {"d": None}]}}, {"a": {"c": [{}, {}]}}),
    ([1, "x", None], [1, "x", {}]),
    ("text", "text"),
]


@pytest.mark.parametrize(("sent", "seen"), SEEN)
def test_the_object_is_seen_without_nulls(sent, seen):
    before = copy.deepcopy(sent)
    assert as_apiserver_sees(sent) == seen
    assert sent == before  # the caller's object is left alone


def test_request_is_bound_without_object_and_old_object():
    # plugin/cel CreateAdmissionRequest: the AdmissionRequest CEL sees has neither.
    bound = bindings(POD, None, {**REQUEST, "oldObject": POD})
    assert set(bound) == {"object", "oldObject", "request"}
    assert set(bound["request"]) == {"operation", "namespace"}
    assert bound["oldObject"] is None
    assert bound["object"]["metadata"]["name"] == "p"
