"""The dispatcher's matching double against k8s.io/apiserver's webhook predicates.

Rules: webhook/predicates/rules/rules.go `Matcher.Matches` (scope, operation, group, version,
resource with `splitResource`). Label selectors: apimachinery labels/selector.go
`Requirement.Matches`, with a missing selector defaulted to `{}` (admissionregistration v1
`SetDefaults_ValidatingWebhook`), which matches everything. namespaceSelector:
webhook/namespace/matcher.go `MatchNamespaceSelector` and `GetNamespaceLabels`. objectSelector:
webhook/object/matcher.go `MatchObjectSelector`. Plurals: apimachinery meta/restmapper.go
`UnsafeGuessKindToResource`. Scope of built-in kinds: the kubernetes client, generated from the
apiserver's OpenAPI.
"""

import copy
import inspect

import kubernetes.client
import pytest

from tests.fakes.apiserver_rules import (
    CLUSTER_KINDS,
    as_received,
    namespace_selector_matches,
    object_selector_matches,
    resource_of,
    rule_matches,
    schema_error,
    selector_matches,
)

PODS = {"group": "", "version": "v1", "resource": "pods"}
DEPLOYMENTS = {"group": "apps", "version": "v1", "resource": "deployments"}
NAMESPACES = {"group": "", "version": "v1", "resource": "namespaces"}
NODES = {"group": "", "version": "v1", "resource": "nodes"}
BASE = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}


def rule(**changes):
    """The pods CREATE rule with some fields replaced (None: the field left out)."""
    changed = {**BASE, **changes}
    return {k: v for k, v in changed.items() if v is not None}


# (rule, resource, operation, namespaced, subresource, matches, what it shows)
RULES = [
    (rule(), PODS, "CREATE", True, "", True, "exact match"),
    (rule(), PODS, "UPDATE", True, "", False, "another operation"),
    (rule(operations=["*"]), PODS, "DELETE", True, "", True, "operation *"),
    (rule(operations=["UPDATE", "CREATE"]), PODS, "CREATE", True, "", True, "any listed op"),
    (rule(operations=[]), PODS, "CREATE", True, "", False, "no operations: nothing"),
    (rule(), DEPLOYMENTS | {"resource": "pods"}, "CREATE", True, "", False, "another group"),
    (rule(apiGroups=["*"]), DEPLOYMENTS | {"resource": "pods"}, "CREATE", True, "", True, "g *"),
    (rule(), PODS | {"version": "v1beta1"}, "CREATE", True, "", False, "another version"),
    (rule(apiVersions=["*"]), PODS | {"version": "v2"}, "CREATE", True, "", True, "version *"),
    (rule(apiVersions=None), PODS, "CREATE", True, "", False, "no versions: nothing"),
    (rule(), PODS | {"resource": "services"}, "CREATE", True, "", False, "another resource"),
    (rule(resources=["*"]), PODS, "CREATE", True, "", True, "* matches a resource"),
    (rule(resources=["*"]), PODS, "CREATE", True, "status", False, "* is no subresource"),
    (rule(), PODS, "CREATE", True, "binding", False, "pods is not pods/binding"),
    (rule(resources=["pods/status"]), PODS, "CREATE", True, "status", True, "r/s exact"),
    (rule(resources=["pods/status"]), PODS, "CREATE", True, "", False, "r/s is not r"),
    (rule(resources=["pods/status"]), PODS, "CREATE", True, "log", False, "another sub"),
    (rule(resources=["pods/*"]), PODS, "CREATE", True, "eviction", True, "pods/* any sub"),
    (rule(resources=["pods/*"]), PODS, "CREATE", True, "", True, "pods/*: sub * matches none"),
    (rule(resources=["*/*"]), NODES, "CREATE", False, "status", True, "*/* everything"),
    (rule(resources=["*/status"]), NODES, "CREATE", False, "status", True, "*/status"),
    (rule(resources=["*/status"]), NODES, "CREATE", False, "", False, "*/status no main"),
    (rule(scope=None), NODES | {"resource": "pods"}, "CREATE", False, "", True, "default *"),
    (rule(scope="*"), PODS, "CREATE", True, "", True, "scope * namespaced"),
    (rule(scope="Namespaced"), PODS, "CREATE", True, "", True, "Namespaced, namespaced"),
    (rule(scope="Namespaced"), PODS, "CREATE", False, "", False, "Namespaced, cluster"),
    (rule(scope="Cluster", resources=["*"]), NODES, "CREATE", False, "", True, "Cluster, cluster"),
    (rule(scope="Cluster"), PODS, "CREATE", True, "", False, "Cluster, namespaced"),
    # rules.go: "attr.GetNamespace() is set to the name of the namespace for requests of the
    # namespace object itself", yet a Namespace counts as cluster-scoped.
    (rule(scope="Namespaced", resources=["*"]), NAMESPACES, "UPDATE", True, "", False, "ns obj"),
    (rule(scope="Cluster", resources=["namespaces"]), NAMESPACES, "CREATE", True, "", True, "ns"),
    (rule(scope="Regional"), PODS, "CREATE", True, "", False, "unknown scope: nothing"),
]


@pytest.mark.parametrize(
    ("spec", "gvr", "operation", "namespaced", "subresource", "expected"),
    [case[:6] for case in RULES],
    ids=[case[6] for case in RULES],
)
def test_rule_matches_as_rules_matcher(spec, gvr, operation, namespaced, subresource, expected):
    assert rule_matches(spec, gvr, operation, namespaced, subresource) is expected


LABELS = {"env": "prod", "team": "a"}


def where(*requirements: tuple) -> dict:
    """A selector of matchExpressions, each (key, operator, *values)."""
    return {
        "matchExpressions": [
            {"key": key, "operator": op, **({"values": list(values)} if values else {})}
            for key, op, *values in requirements
        ]
    }


# (selector, labels, matches, what it shows)
SELECTORS = [
    (None, LABELS, True, "absent: defaulted to {}, everything"),
    ({}, {}, True, "empty matches everything"),
    ({"matchLabels": {}, "matchExpressions": []}, LABELS, True, "empty lists"),
    ({"matchLabels": {"env": "prod"}}, LABELS, True, "matchLabels equal"),
    ({"matchLabels": {"env": "dev"}}, LABELS, False, "matchLabels other value"),
    ({"matchLabels": {"tier": "web"}}, LABELS, False, "matchLabels missing key"),
    ({"matchLabels": {"env": "prod", "team": "b"}}, LABELS, False, "matchLabels all must hold"),
    (where(("env", "In", "dev", "prod")), LABELS, True, "In, value listed"),
    (where(("env", "In", "dev")), LABELS, False, "In, value not listed"),
    (where(("tier", "In", "")), LABELS, False, "In, key missing (not even '')"),
    (where(("env", "NotIn", "prod")), LABELS, False, "NotIn, value listed"),
    (where(("env", "NotIn", "dev")), LABELS, True, "NotIn, value not listed"),
    (where(("tier", "NotIn", "web")), LABELS, True, "NotIn, key missing"),
    (where(("env", "Exists")), LABELS, True, "Exists"),
    (where(("tier", "Exists")), LABELS, False, "Exists, key missing"),
    (where(("tier", "DoesNotExist")), LABELS, True, "DoesNotExist"),
    (where(("env", "DoesNotExist")), LABELS, False, "DoesNotExist, key present"),
    (
        {**where(("env", "Exists")), "matchLabels": {"team": "b"}},
        LABELS,
        False,
        "matchLabels AND matchExpressions",
    ),
    (where(("env", "Exists"), ("team", "NotIn", "a")), LABELS, False, "expressions AND"),
]


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [case[:3] for case in SELECTORS],
    ids=[case[3] for case in SELECTORS],
)
def test_selector_matches_as_label_requirements(selector, labels, expected):
    assert selector_matches(selector, labels) is expected


NOT_SYSTEM = where(("kubernetes.io/metadata.name", "NotIn", "kube-system"))
TEAM_A = {"matchLabels": {"team": "a"}}


def request(resource, namespace, operation="CREATE", obj=None, old=None, subresource=""):
    """The parts of an AdmissionRequest the selectors read."""
    return {
        "resource": resource,
        "subResource": subresource,
        "namespace": namespace,
        "operation": operation,
        "object": obj,
        "oldObject": old,
    }


def labelled(labels):
    return {"metadata": {"name": "o", "labels": labels}} if labels is not None else {"metadata": {}}


SYSTEM = {"kubernetes.io/metadata.name": "kube-system"}
TEAM_A_NS, TEAM_B_NS, BARE_NS = labelled({"team": "a"}), labelled({"team": "b"}), labelled(None)
# (selector, request, labels of the request's namespace, matches, what it shows)
NAMESPACE_SELECTORS = [
    (NOT_SYSTEM, request(PODS, "kube-system"), SYSTEM, False, "pod in an excluded namespace"),
    (NOT_SYSTEM, request(PODS, "team-a"), {"kubernetes.io/metadata.name": "team-a"}, True, "ok"),
    (TEAM_A, request(NODES, ""), {}, True, "cluster-scoped: never exempted"),
    ({}, request(PODS, "kube-system"), SYSTEM, True, "empty selector"),
    (None, request(PODS, "kube-system"), SYSTEM, True, "absent selector"),
    (TEAM_A, request(NAMESPACES, "", "CREATE", TEAM_A_NS), {}, True, "ns CREATE: own labels"),
    (TEAM_A, request(NAMESPACES, "n", "CREATE", BARE_NS), {"team": "a"}, False, "ns, no labels"),
    (
        TEAM_A,
        request(NAMESPACES, "", "UPDATE", TEAM_B_NS, TEAM_A_NS),
        {"team": "a"},
        False,
        "Namespace UPDATE: the new object's labels",
    ),
    (
        TEAM_A,
        request(NAMESPACES, "n", "DELETE", None, TEAM_B_NS),
        {"team": "a"},
        True,
        "Namespace DELETE: the stored namespace's labels",
    ),
    (
        TEAM_A,
        request(NAMESPACES, "n", "UPDATE", BARE_NS, subresource="finalize"),
        {"team": "a"},
        True,
        "a Namespace subresource: the stored namespace's labels",
    ),
]


@pytest.mark.parametrize(
    ("selector", "req", "namespace_labels", "expected"),
    [case[:4] for case in NAMESPACE_SELECTORS],
    ids=[case[4] for case in NAMESPACE_SELECTORS],
)
def test_namespace_selector_as_match_namespace_selector(selector, req, namespace_labels, expected):
    assert namespace_selector_matches(selector, req, namespace_labels) is expected


APP = {"matchLabels": {"app": "x"}}
# (selector, object, oldObject, matches, what it shows)
OBJECT_SELECTORS = [
    ({}, None, None, True, "empty selector, no object at all"),
    (None, labelled(None), None, True, "absent selector"),
    (APP, labelled({"app": "x"}), None, True, "object matches"),
    (APP, labelled({"app": "y"}), None, False, "object does not"),
    (APP, labelled({"app": "y"}), labelled({"app": "x"}), True, "oldObject matches"),
    (APP, None, labelled({"app": "x"}), True, "DELETE: oldObject only"),
    (APP, None, None, False, "no object: matchObject(nil) is false"),
    (APP, labelled(None), labelled({}), False, "neither has the label"),
    (where(("app", "DoesNotExist")), labelled(None), None, True, "no labels: the empty set"),
]


@pytest.mark.parametrize(
    ("selector", "obj", "old", "expected"),
    [case[:4] for case in OBJECT_SELECTORS],
    ids=[case[4] for case in OBJECT_SELECTORS],
)
def test_object_selector_as_match_object_selector(selector, obj, old, expected):
    req = request(PODS, "team-a", "UPDATE" if obj and old else "CREATE", obj, old)
    assert object_selector_matches(selector, req) is expected


# (apiVersion, kind, group, version, resource): UnsafeGuessKindToResource's plural, which is
# the REST path's plural for these (e.g. the client's /api/v1/namespaces/{namespace}/endpoints).
RESOURCES = [
    ("v1", "Pod", "", "v1", "pods"),
    ("v1", "Endpoints", "", "v1", "endpoints"),  # unpluralizedSuffixes
    ("discovery.k8s.io/v1", "EndpointSlice", "discovery.k8s.io", "v1", "endpointslices"),
    ("networking.k8s.io/v1", "Ingress", "networking.k8s.io", "v1", "ingresses"),
    ("networking.k8s.io/v1", "NetworkPolicy", "networking.k8s.io", "v1", "networkpolicies"),
    ("apps/v1", "DaemonSet", "apps", "v1", "daemonsets"),
    ("storage.k8s.io/v1", "StorageClass", "storage.k8s.io", "v1", "storageclasses"),
    ("batch/v1", "CronJob", "batch", "v1", "cronjobs"),
    # the guess is a guess: a Gateway CRD's real plural is "gateways"
    ("example.com/v1", "Gateway", "example.com", "v1", "gatewaies"),
]


@pytest.mark.parametrize(("api_version", "kind", "group", "version", "plural"), RESOURCES)
def test_resource_of_guesses_the_plural_as_apimachinery(api_version, kind, group, version, plural):
    gvk, gvr = resource_of({"apiVersion": api_version, "kind": kind})
    assert gvk == {"group": group, "version": version, "kind": kind}
    assert gvr == {"group": group, "version": version, "resource": plural}


def client_scopes() -> tuple[set[str], set[str]]:
    """(cluster-scoped, namespaced) resources of the kubernetes client, lowercased, no `_`."""
    cluster, namespaced = set(), set()
    for name, api in inspect.getmembers(kubernetes.client, inspect.isclass):
        if not name.endswith("Api") or name == "CustomObjectsApi":
            continue
        for method in dir(api):
            if not method.startswith("create_") or method.endswith("_with_http_info"):
                continue
            if method.startswith("create_namespaced_"):
                namespaced.add(method.removeprefix("create_namespaced_").replace("_", ""))
            else:
                cluster.add(method.removeprefix("create_").replace("_", ""))
    return cluster, namespaced


def test_cluster_kinds_are_the_clusters_cluster_scoped_kinds():
    cluster, namespaced = client_scopes()
    ours = {kind.lower() for kind in CLUSTER_KINDS}
    assert ours == cluster
    assert not ours & namespaced
    assert {"pod", "deployment", "job", "configmap"} <= namespaced


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": None},
    "spec": {"containers": [{"name": "c", "image": "i", "command": None}]},
}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "annotations": None}}
# (object as sent, namespace of the request, object as admission receives it)
RECEIVED = [
    (
        POD,
        "team-a",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team-a"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        },
    ),
    (NODE, "team-a", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}),
    (
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "b"}},
        "team-a",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"namespace": "team-a"},
            "data": {"a": "b"},
        },
    ),
]


@pytest.mark.parametrize(("sent", "namespace", "received"), RECEIVED)
def test_as_received_drops_nulls_and_sets_the_namespace(sent, namespace, received):
    before = copy.deepcopy(sent)
    assert as_received(sent, namespace) == received
    assert sent == before


VALID_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p"},
    "spec": {"containers": [{"name": "c", "image": "i"}]},
}
# (object, error expected (a substring) or None, whether the kind has a schema)
SCHEMAS = [
    (VALID_POD, None, True),
    ({**VALID_POD, "spec": {**VALID_POD["spec"], "foo": 1}}, "spec: Additional properties", True),
    ({**VALID_POD, "spec": {"containers": "c"}}, "spec.containers: 'c' is not of type", True),
    ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}, None, False),
    ({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "d"}}, None, False),
]


@pytest.mark.parametrize(("obj", "error", "has_schema"), SCHEMAS)
def test_schema_error_is_strict_and_knows_unserved_kinds(obj, error, has_schema):
    message, checked = schema_error(obj)
    assert checked is has_schema
    if error is None:
        assert message is None
    else:
        assert message is not None and message.startswith(error)
