"""What the apiserver's admission dispatcher works out before it calls a webhook.

Which rules and label selectors match a request, the group/version/kind/resource of an object,
the object as admission sees it, and whether its schema admits it. Pure functions of their
arguments, shared by the dispatcher double (tests/fakes/apiserver_harness.py), the install
(tests/fakes/apiserver_install.py) and the end-to-end tests. Each cites the Kubernetes source
it imitates; tests/fakes/test_rules.py checks them against it.
"""

from __future__ import annotations

import kubernetes_validate

from tests.fakes.apiserver_cel import as_apiserver_sees

K8S_VERSION = kubernetes_validate.latest_version()
# The built-in kinds served cluster-scoped (the RESTMapper's RESTScopeRoot), as the kubernetes
# client generated from the apiserver's OpenAPI has them: `create_<kind>`, no
# `create_namespaced_<kind>` (tests/fakes/test_rules.py checks the list against it).
CLUSTER_KINDS = {
    "APIService",
    "CertificateSigningRequest",
    "ClusterRole",
    "ClusterRoleBinding",
    "ClusterTrustBundle",
    "CSIDriver",
    "CSINode",
    "CustomResourceDefinition",
    "DeviceClass",
    "DeviceTaintRule",
    "FlowSchema",
    "IngressClass",
    "IPAddress",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "MutatingWebhookConfiguration",
    "Namespace",
    "Node",
    "PersistentVolume",
    "PriorityClass",
    "PriorityLevelConfiguration",
    "ResourcePoolStatusRequest",
    "ResourceSlice",
    "RuntimeClass",
    "SelfSubjectAccessReview",
    "SelfSubjectReview",
    "SelfSubjectRulesReview",
    "ServiceCIDR",
    "StorageClass",
    "StorageVersion",
    "StorageVersionMigration",
    "SubjectAccessReview",
    "TokenReview",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
    "VolumeAttachment",
    "VolumeAttributesClass",
}
# meta.UnsafeGuessKindToResource (apimachinery/pkg/api/meta/restmapper.go): kinds ending so are
# their own plural.
UNPLURALIZED_SUFFIXES = ("endpoints",)
# rules.go's namespaceResource: the Namespace object is cluster-scoped whatever its request says.
NAMESPACES = {"group": "", "version": "v1", "resource": "namespaces"}


def as_received(obj: dict, namespace: str) -> dict:
    """`obj` as the apiserver hands it to admission: nulls dropped, metadata.namespace set."""
    received = as_apiserver_sees(obj)
    if received.get("kind") not in CLUSTER_KINDS:
        received.setdefault("metadata", {})["namespace"] = namespace
    return received


def resource_of(obj: dict) -> tuple[dict, dict]:
    """GroupVersionKind and GroupVersionResource (plural as meta.UnsafeGuessKindToResource)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = obj["kind"].lower()
    plural = (
        kind
        if kind.endswith(UNPLURALIZED_SUFFIXES)
        else kind + "es"
        if kind.endswith("s")
        else kind[:-1] + "ies"
        if kind.endswith("y")
        else kind + "s"
    )
    return (
        {"group": group, "version": version, "kind": obj["kind"]},
        {"group": group, "version": version, "resource": plural},
    )


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """A metav1.LabelSelector against labels (labels/selector.go `Requirement.Matches`).

    An absent or empty selector matches everything: the webhook defaults (admissionregistration
    v1 `SetDefaults_ValidatingWebhook`) make a missing one `{}`, which `LabelSelectorAsSelector`
    turns into labels.Everything().
    """
    selector = selector or {}
    tests = {
        "In": lambda e: labels.get(e["key"]) in e["values"],
        "NotIn": lambda e: labels.get(e["key"]) not in e["values"],
        "Exists": lambda e: e["key"] in labels,
        "DoesNotExist": lambda e: e["key"] not in labels,
    }
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and all(
        tests[e["operator"]](e) for e in selector.get("matchExpressions") or []
    )


def _empty(selector: dict | None) -> bool:
    """labels.Selector.Empty() of the selector: no matchLabels and no matchExpressions."""
    return not (selector or {}).get("matchLabels") and not (selector or {}).get("matchExpressions")


def namespace_selector_matches(
    selector: dict | None, request: dict, namespace_labels: dict
) -> bool:
    """webhook/namespace/matcher.go `MatchNamespaceSelector` for an AdmissionRequest.

    A cluster-scoped request other than for a Namespace is never exempted; an empty selector
    matches; a Namespace CREATE or UPDATE is judged by the labels of the object itself
    (`GetNamespaceLabels`: the lister does not have it yet); anything else by
    `namespace_labels`, the labels of the namespace the request is in.
    """
    resource = request["resource"]["resource"]
    if not request.get("namespace") and resource != "namespaces":
        return True
    if _empty(selector):
        return True
    if (
        resource == "namespaces"
        and not request.get("subResource")
        and request["operation"] in ("CREATE", "UPDATE")
    ):
        namespace_labels = (request["object"].get("metadata") or {}).get("labels") or {}
    return selector_matches(selector, namespace_labels)


def object_selector_matches(selector: dict | None, request: dict) -> bool:
    """webhook/object/matcher.go `MatchObjectSelector`: an empty selector matches; else the
    labels of `object` or of `oldObject` must match (a missing one never does)."""
    if _empty(selector):
        return True
    return any(
        obj is not None
        and selector_matches(selector, (obj.get("metadata") or {}).get("labels") or {})
        for obj in (request.get("object"), request.get("oldObject"))
    )


def rule_matches(
    rule: dict, gvr: dict, operation: str, namespaced: bool, subresource: str = ""
) -> bool:
    """One RuleWithOperations, as webhook/predicates/rules/rules.go `Matcher.Matches`.

    `namespaced`: the request names a namespace. Each list matches its value or "*"; a
    resource entry "r/s" matches resource r (or "*") with subresource s (or "*": any, none
    included), a plain "r" only the resource itself; scope "*" (the default) matches any
    request, "Namespaced" a namespaced one, "Cluster" a cluster-scoped one, and a Namespace
    object counts as cluster-scoped whatever its request's namespace says.
    """

    def has(key, value):
        return bool({"*", value} & set(rule.get(key, [])))

    resources = [([*r.split("/", 1), ""])[:2] for r in rule.get("resources", [])]
    scope = rule.get("scope", "*")
    cluster = gvr == NAMESPACES or not namespaced
    return (
        (
            scope == "*"
            or (scope == "Namespaced" and not cluster)
            or (scope == "Cluster" and cluster)
        )
        and has("operations", operation)
        and has("apiGroups", gvr["group"])
        and has("apiVersions", gvr["version"])
        and any(r in ("*", gvr["resource"]) and s in ("*", subresource) for r, s in resources)
    )


def schema_error(obj: dict) -> tuple[str | None, bool]:
    """(kubernetes-validate's strict error or None, whether the kind has a schema)."""
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError:
        return None, False
    except kubernetes_validate.ValidationError as err:
        return f"{'.'.join(map(str, err.path))}: {err.message}", True
    return None, True
