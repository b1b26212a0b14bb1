"""Which requests the final-state check decides: the webhook's scope, written in CEL.

The same objects as the webhook (`webhook.core.decision`, `webhook.core.lifecycle`,
`webhook.core.annotations`): Pods on CREATE and workload pod templates on CREATE and on an
UPDATE that changes the template (never a Job's, whose template is immutable), in a
namespace some policy governs in enforce mode (`mode: audit` admits objects as they come),
never kube-system or lwgpu-system; not a mirror pod, not a workload whose controller is a
kind the webhook reviews, not one that `lwgpu.io/skip` skips where the governing policy
allows it (`allowSkip`, read in `checks.scope_variables`).
The scope is `matchConstraints` and `matchConditions`: a request outside it is not
evaluated at all, so no validation of it can fail.

The governing policy is chosen on `request.namespace`, not `namespaceObject`: match
conditions are evaluated without the namespace object (`staging/src/k8s.io/apiserver/pkg/
admission/plugin/webhook/matchconditions/matcher.go`, `Match` passes nil), and for a
namespaced object both name the same namespace.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from webhook.api.names import BOOL_TRUE, MIRROR_ANNOTATION, SKIP_ANNOTATION
from webhook.api.workload import TEMPLATE_PATHS, field_path, pointer
from webhook.policy import Policy, PolicySet
from webhook.policy.model import is_glob, pattern_rank

from .cel import Named, Unexpressible, all_of, any_of, choose, dig, string, strings

# Never governed, whatever the policies say: the cluster and lwgpu itself must always be able
# to start pods (deploy/base/webhook-scope.yaml keeps the webhook away from them too).
NEVER_GOVERNED = ("kube-system", "lwgpu-system")
# The API resource of each reviewed kind.
RESOURCES = {
    "Pod": "pods",
    "ReplicationController": "replicationcontrollers",
    "Deployment": "deployments",
    "StatefulSet": "statefulsets",
    "DaemonSet": "daemonsets",
    "ReplicaSet": "replicasets",
    "Job": "jobs",
    "CronJob": "cronjobs",
}


def kind_key(group: str, kind: str) -> str:
    """How `variables.kind` spells a kind: `apps/Deployment`, `/Pod`."""
    return f"{group}/{kind}"


POD = kind_key("", "Pod")
JOB = kind_key("batch", "Job")


def resource_rules() -> list[dict[str, Any]]:
    """The webhook's rules: Pods on CREATE, the workloads on CREATE and UPDATE, by group."""
    by_group: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for group, kind in TEMPLATE_PATHS:
        by_group[(group, kind == "Pod")].append(RESOURCES[kind])
    return [
        {
            "apiGroups": [group],
            "apiVersions": ["v1"],
            "resources": resources,
            "operations": ["CREATE"] if pods else ["CREATE", "UPDATE"],
            "scope": "Namespaced",
        }
        for (group, pods), resources in by_group.items()
    ]


def namespace_selector() -> dict[str, Any]:
    """Every namespace but those never governed (the label the apiserver sets on each)."""
    return {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": list(NEVER_GOVERNED),
            }
        ]
    }


def _by_template_path(render: Callable[[tuple[str, ...]], str], otherwise: str) -> str:
    """A value for the object's kind, rendered from where its pod template sits."""
    kinds: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for (group, kind), path in TEMPLATE_PATHS.items():
        kinds[path].append(kind_key(group, kind))
    cases = [(f"variables.kind in {strings(keys)}", render(path)) for path, keys in kinds.items()]
    return choose(cases, otherwise)


def _template(root: str) -> str:
    """The pod template of the object `root` (the Pod itself for a Pod); `{}` if absent."""
    return _by_template_path(lambda path: dig(root, path, "{}") if path else root, "{}")


def _field_prefix() -> str:
    """Where the pod template sits, for messages: `spec.template.` (`` for a Pod)."""
    return _by_template_path(lambda path: string(field_path(path) + "." if path else ""), '""')


def template_pointer() -> Named:
    """Where the pod template sits, as a JSON pointer for patches: `/spec/template`."""
    return {
        "name": "templatePointer",
        "expression": _by_template_path(lambda path: string(pointer(path)), '""'),
    }


def _glob(pattern: str) -> str:
    """Whether `request.namespace` matches a namespace pattern, as `fnmatchcase` does."""
    if pattern == "*":
        return "true"
    if not is_glob(pattern):
        return f"request.namespace == {string(pattern)}"
    # The loader admits a-z, 0-9, '-', '*' and '?': no character a regular expression reads.
    if not all(c.isalnum() or c in "-*?" for c in pattern):
        raise Unexpressible(f"namespace pattern {pattern!r}: only a-z, 0-9, '-', '*', '?'")
    regex = "^" + pattern.replace("*", ".*").replace("?", ".") + "$"
    return f"request.namespace.matches({string(regex)})"


def governing(policies: PolicySet) -> str:
    """The index of the policy that governs `request.namespace`, -1 for none."""
    return _of_governing(policies, str, "-1")


def enforced(policies: PolicySet) -> str:
    """Whether the policy that governs `request.namespace` is in enforce mode (`mode`). In an
    audited namespace the webhook admits objects as they come, so the apiserver must neither
    refuse nor rewrite them either."""
    modes = [p.mode == "enforce" for p in policies.policies]
    return _of_governing(policies, lambda index: str(modes[index]).lower(), "false")


def _of_governing(policies: PolicySet, value: Callable[[int], str], otherwise: str) -> str:
    """`value(i)` for the policy i that governs `request.namespace`, `otherwise` for none.

    `PolicySet.for_namespace`'s rule: the most specific include of a policy that does not
    exclude the namespace. Loading refuses two equally specific includes that can match one
    namespace, so trying every include from the most specific down finds the same policy.
    """
    claims = sorted(
        (
            (pattern_rank(pattern), index, pattern)
            for index, policy in enumerate(policies.policies)
            for pattern in policy.include
        ),
        key=lambda claim: claim[0],
        reverse=True,
    )
    cases = [
        (all_of([_glob(pattern), _not_excluded(policies.policies[index])]), value(index))
        for _, index, pattern in claims
    ]
    return choose(cases, otherwise)


def _not_excluded(policy: Policy) -> str:
    """Whether none of the policy's excludes matches `request.namespace`."""
    return f"!{any_of(_glob(e) for e in policy.exclude)}" if policy.exclude else "true"


def variables(policies: PolicySet) -> list[Named]:
    """The object's parts every other expression reads, each read once and guarded."""
    template, spec = "variables.template", "variables.spec"
    return [
        {"name": "kind", "expression": "request.kind.group + '/' + request.kind.kind"},
        {"name": "template", "expression": _template("object")},
        {
            "name": "oldTemplate",
            "expression": f"request.operation == 'UPDATE' ? ({_template('oldObject')}) : {{}}",
        },
        {"name": "fieldPrefix", "expression": _field_prefix()},
        {"name": "annotations", "expression": dig(template, ("metadata", "annotations"), "{}")},
        {
            "name": "workloadAnnotations",
            "expression": dig("object", ("metadata", "annotations"), "{}"),
        },
        {"name": "spec", "expression": dig(template, ("spec",), "{}")},
        {"name": "initContainers", "expression": dig(spec, ("initContainers",), "[]")},
        {"name": "appContainers", "expression": dig(spec, ("containers",), "[]")},
        {
            "name": "containers",
            "expression": "variables.initContainers + variables.appContainers",
        },
        {"name": "governing", "expression": governing(policies)},
        *lifecycle_variables(),
    ]


def reviewed_controller() -> str:
    """Whether the object's controller is a workload the webhook reviews (whose pods it
    reviews at their CREATE): `webhook.core.lifecycle.controller_of`. The webhook's own
    scope (deploy/base/webhook-scope.yaml) holds the same expression."""
    owners = dig("object", ("metadata", "ownerReferences"), "[]")
    reviewed = [kind_key(g, k) for g, k in TEMPLATE_PATHS if kind_key(g, k) != POD]
    group = (
        "(r.apiVersion.contains('/')"
        " ? r.apiVersion.substring(0, r.apiVersion.lastIndexOf('/')) : '')"
    )
    return (
        f"{owners}.exists(r, has(r.controller) && r.controller == true"
        f" && has(r.apiVersion) && has(r.kind)\n  && {group} + '/' + r.kind in {strings(reviewed)})"
    )


def _skipped(annotations: str) -> str:
    return (
        f"{string(SKIP_ANNOTATION)} in {annotations}"
        f" && {annotations}[{string(SKIP_ANNOTATION)}] in {strings(BOOL_TRUE)}"
    )


def lifecycle_variables() -> list[Named]:
    """Whether the webhook decides the object at all, by how it was written."""
    return [
        {
            # lifecycle.left_alone: a Pod only on CREATE, a Job's template never changes
            "name": "templateWritten",
            "expression": f"request.operation == 'CREATE' || (!(variables.kind in"
            f" {strings([POD, JOB])}) && variables.template != variables.oldTemplate)",
        },
        {
            # annotations.skip: the pod template's annotation, or the workload's own
            "name": "skipped",
            "expression": f"({_skipped('variables.annotations')})\n|| (variables.kind !="
            f" {string(POD)} && {_skipped('variables.workloadAnnotations')})",
        },
    ]


def match_conditions(policies: PolicySet) -> list[Named]:
    """Namespaces no policy governs or whose policy only audits, mirror pods, workloads a
    reviewed workload controls.

    Written on `object` and `request` alone: the apiserver compiles match conditions
    without the policy's variables when it validates the policy
    (`pkg/apis/admissionregistration/validation/validation.go`,
    `validateMatchConditionsExpression`, a stateless compiler).
    """
    claims = [
        all_of(["true" if "*" in p.include else any_of(map(_glob, p.include)), _not_excluded(p)])
        for p in policies.policies
    ]
    annotations = dig("object", ("metadata", "annotations"), "{}")
    pod = "request.kind.group == '' && request.kind.kind == 'Pod'"
    audits = any(p.mode == "audit" for p in policies.policies)
    modes: list[Named] = [{"name": "enforced-namespace", "expression": enforced(policies)}]
    return [
        {"name": "governed-namespace", "expression": any_of(claims)},
        *(modes if audits else []),
        {
            "name": "not-a-mirror-pod",
            "expression": f"!({pod} && {string(MIRROR_ANNOTATION)} in {annotations})",
        },
        {
            "name": "not-controlled-by-a-reviewed-workload",
            "expression": f"({pod}) || !{reviewed_controller()}",
        },
    ]
