"""What the apiserver's admission dispatcher works out before it calls a webhook.

Which rules and label selectors match a request, the group/version/kind/resource of an object,
the object as admission sees it, and whether its schema admits it. Pure functions of their
arguments, shared by the dispatcher double (tests/fakes/apiserver_harness.py), the install
(tests/fakes/apiserver_install.py) and the end-to-end tests.
"""

from __future__ import annotations

import kubernetes_validate

from tests.fakes.apiserver_cel import as_apiserver_sees

K8S_VERSION = kubernetes_validate.latest_version()
CLUSTER_KINDS = {
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "StorageClass",
    "PriorityClass",
    "RuntimeClass",
    "CustomResourceDefinition",
}


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
        kind + "es"
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
    """A metav1.LabelSelector against labels; an absent or empty selector matches everything."""
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


def rule_matches(rule: dict, gvr: dict, operation: str, namespaced: bool) -> bool:
    """One RuleWithOperations, as the apiserver's webhook rule matcher (no subresource here)."""

    def has(key, value):
        return bool({"*", value} & set(rule.get(key, [])))

    resources = [([*r.split("/", 1), ""])[:2] for r in rule.get("resources", [])]
    scope = rule.get("scope", "*")
    return (
        has("operations", operation)
        and has("apiGroups", gvr["group"])
        and has("apiVersions", gvr["version"])
        and any(r in ("*", gvr["resource"]) and s in ("*", "") for r, s in resources)
        and (scope == "*" or (scope == "Namespaced") == namespaced)
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
