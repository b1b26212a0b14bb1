"""The apiserver's validation of a final object, for the rules GPU pods meet; a test double.

Written from Kubernetes' sources, apart from the product's `webhook.api.validation` (a double may
not reuse the code it checks). Each rule names the function it imitates:

- label keys and values, annotation keys: `k8s.io/apimachinery/pkg/util/validation`
  (`IsQualifiedName`, `IsDNS1123Subdomain`, `IsValidLabelValue`),
  `apimachinery/pkg/apis/meta/v1/validation` (`ValidateLabels`) and
  `apimachinery/pkg/api/validation/objectmeta.go` (`ValidateAnnotations`), on the object's
  metadata, its pod template's (at `spec.template.labels`, as `ValidatePodTemplateSpec` names it)
  and the pod spec's `nodeSelector`;
- container resources: `pkg/apis/core/validation/validation.go`, `ValidateResourceRequirements`,
  `validateContainerResourceName`, `ValidateResourceQuantityValue` (extended resources are whole
  numbers; for extended resources and hugepages requests must equal limits, and a request needs
  a limit), with `pkg/apis/core/helper` (`IsExtendedResourceName`, `IsNativeResource`,
  `IsOvercommitAllowed`);
- tolerations: `ValidateTolerations` and `validateTaintEffect`;
- a Job's pod template on UPDATE: `pkg/apis/batch/validation`, `ValidateJobSpecUpdate` ->
  `validatePodTemplateUpdate` (scheduling directives and template metadata may change only
  while the Job is suspended and never started: `pkg/registry/batch/job/strategy.go` sets
  `AllowMutableSchedulingDirectives` so).

Errors read as `field.Error.Error()` prints them: `<path>: Invalid value: "2": must be ...`.
Left out: everything else the apiserver checks (names, ports, probes, volumes, Pod updates).
"""

from __future__ import annotations

import copy
import json
import re

from tests.fakes.apiserver_quantity import QuantityError, parse, text

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
# (group, kind) -> where the pod template sits; () is a Pod itself.
TEMPLATES = {
    ("", "Pod"): (),
    ("", "ReplicationController"): ("spec", "template"),
    ("apps", "Deployment"): ("spec", "template"),
    ("apps", "ReplicaSet"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"),
    ("apps", "DaemonSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"),
}
STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
STANDARD_RESOURCES = STANDARD_CONTAINER_RESOURCES | {"pods", "services", "storage", "secrets"}
OPERATORS, EFFECTS = ("Equal", "Exists"), ("NoSchedule", "PreferNoSchedule", "NoExecute")
ANNOTATIONS_LIMIT = 256 * 1024  # TotalAnnotationSizeLimitB
_SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character"
)
_LIMIT_REQUIRED = "Limit must be set for non overcommitable resources"
_EMPTY_KEY = (
    'operator must be Exists when `key` is empty, which means "match all values and all keys"'
)
_SECONDS = "effect must be 'NoExecute' when `tolerationSeconds` is set"
_EXISTS_VALUE = "value must be empty when `operator` is 'Exists'"


def _show(value: object) -> str:
    return (
        str(value) if isinstance(value, int) and not isinstance(value, bool) else json.dumps(value)
    )


def invalid(path: str, value: object, detail: str) -> str:
    """`field.Invalid(path, value, detail)` as printed."""
    return f"{path}: Invalid value: {_show(value)}: {detail}"


def not_supported(path: str, value: object, supported: tuple[str, ...]) -> str:
    """`field.NotSupported(path, value, supported)` as printed."""
    listed = ", ".join(json.dumps(s) for s in supported)
    return f"{path}: Unsupported value: {_show(value)}: supported values: {listed}"


def qualified_name_errors(value: str) -> list[str]:
    """`IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of <= 63."""
    parts = value.split("/")
    if len(parts) > 2:
        return [f"a qualified name {_NAME_RULE} with an optional DNS subdomain prefix and '/'"]
    errors, name = [], parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _SUBDOMAIN.fullmatch(prefix):
            errors.append(f"prefix part {_SUBDOMAIN_RULE}")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _NAME.fullmatch(name):
        errors.append(f"name part {_NAME_RULE}")
    return errors


def label_value_errors(value: str) -> list[str]:
    """`IsValidLabelValue`: empty, or <= 63 characters of the name rule."""
    errors = ["must be no more than 63 characters"] if len(value) > 63 else []
    if value and not _NAME.fullmatch(value):
        errors.append(f"a valid label {_NAME_RULE}")
    return errors


def validate_labels(labels: object, path: str) -> list[str]:
    """`ValidateLabels`: each key a qualified name, each value a label value."""
    errors = []
    for key, value in (labels or {}).items() if isinstance(labels, dict) else ():
        errors += [invalid(path, key, m) for m in qualified_name_errors(key)]
        errors += [invalid(path, value, m) for m in label_value_errors(str(value))]
    return errors


def validate_annotations(annotations: object, path: str) -> list[str]:
    """`ValidateAnnotations`: keys are qualified names (case aside); 256 KiB in all."""
    annotations = annotations if isinstance(annotations, dict) else {}
    errors = [invalid(path, k, m) for k in annotations for m in qualified_name_errors(k.lower())]
    if sum(len(k) + len(str(v)) for k, v in annotations.items()) > ANNOTATIONS_LIMIT:
        errors.append(f"{path}: Too long: may not be more than {ANNOTATIONS_LIMIT} bytes")
    return errors


def is_native(name: str) -> bool:
    """`IsNativeResource`: no prefix, or a `kubernetes.io/` one."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """`IsExtendedResourceName`: not native, no `requests.` prefix, a quota name is qualified."""
    return (
        not is_native(name)
        and not name.startswith("requests.")
        and not qualified_name_errors("requests." + name)
    )


def overcommit_allowed(name: str) -> bool:
    """`IsOvercommitAllowed`: native and not hugepages."""
    return is_native(name) and not name.startswith("hugepages-")


def _resource_errors(name: str, value: object, path: str) -> list[str]:
    """`validateContainerResourceName` and `ValidateResourceQuantityValue` for one entry."""
    errors = [invalid(path, name, m) for m in qualified_name_errors(name)]
    if not errors and "/" not in name:
        if name not in STANDARD_RESOURCES and not name.startswith("hugepages-"):
            errors.append(
                invalid(path, name, "must be a standard resource type or fully qualified")
            )
        if name not in STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            errors.append(invalid(path, name, "must be a standard resource for containers"))
    elif not errors and not is_native(name) and not is_extended(name):
        errors.append(invalid(path, name, "doesn't follow extended resource name standard"))
    try:
        amount = parse(value)
    except QuantityError:
        return [*errors, invalid(path, value, "quantities must match the regular expression")]
    if amount < 0:
        errors.append(invalid(path, text(value), "must be greater than or equal to 0"))
    if is_extended(name) and amount.denominator != 1:
        errors.append(invalid(path, value, "must be an integer"))
    return errors


def validate_resource_requirements(resources: object, path: str) -> list[str]:
    """`ValidateResourceRequirements` of one container's `resources`."""
    resources = resources if isinstance(resources, dict) else {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    errors = []
    for name in sorted(limits):
        errors += _resource_errors(name, limits[name], f"{path}.limits[{name}]")
    for name in sorted(requests):
        value = requests[name]
        errors += _resource_errors(name, value, f"{path}.requests[{name}]")
        if name not in limits:
            if not overcommit_allowed(name):
                errors.append(f"{path}.limits: Required value: {_LIMIT_REQUIRED}")
            continue
        try:
            request, limit = parse(value), parse(limits[name])
        except QuantityError:
            continue
        if request != limit and not overcommit_allowed(name):
            detail = f"must be equal to {name} limit of {text(limits[name])}"
            errors.append(invalid(f"{path}.requests", text(value), detail))
        elif request > limit:
            detail = f"must be less than or equal to {name} limit of {text(limits[name])}"
            errors.append(invalid(f"{path}.requests", text(value), detail))
    return errors


def validate_tolerations(tolerations: object, path: str) -> list[str]:
    """`ValidateTolerations`."""
    errors = []
    for index, toleration in enumerate(tolerations if isinstance(tolerations, list) else []):
        at = f"{path}[{index}]"
        key, operator = toleration.get("key", ""), toleration.get("operator", "")
        value, effect = toleration.get("value", ""), toleration.get("effect", "")
        if key:
            errors += [invalid(f"{at}.key", key, m) for m in qualified_name_errors(key)]
        if not key and operator != "Exists":
            errors.append(invalid(f"{at}.operator", operator, _EMPTY_KEY))
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(invalid(f"{at}.effect", effect, _SECONDS))
        if operator in ("Equal", ""):
            if messages := label_value_errors(value):
                errors.append(invalid(f"{at}.operator", value, ";".join(messages)))
        elif operator == "Exists":
            if value:
                errors.append(invalid(f"{at}.operator", toleration, _EXISTS_VALUE))
        else:
            errors.append(not_supported(f"{at}.operator", operator, OPERATORS))
        if effect and effect not in EFFECTS:  # validateTaintEffect
            errors.append(not_supported(f"{at}.effect", effect, EFFECTS))
    return errors


def validate_pod_spec(spec: object, path: str) -> list[str]:
    """The parts of `ValidatePodSpec` above: resources, nodeSelector, tolerations."""
    spec = spec if isinstance(spec, dict) else {}
    errors = []
    for section in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(section) or []):
            errors += validate_resource_requirements(
                container.get("resources"), f"{path}.{section}[{index}].resources"
            )
    errors += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    return errors + validate_tolerations(spec.get("tolerations"), f"{path}.tolerations")


def _dig(obj: object, path: tuple[str, ...]) -> object:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def semantically_equal(a: object, b: object) -> bool:
    """`apiequality.Semantic.DeepEqual` on JSON: an empty map or list equals an absent one."""

    def strip(value: object) -> object:
        if isinstance(value, dict):
            kept = {k: strip(v) for k, v in value.items()}
            return {k: v for k, v in kept.items() if v not in (None, {}, [])}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip(a) == strip(b)


def validate_job_template_update(job: dict, old: dict) -> list[str]:
    """`validatePodTemplateUpdate`: the template may not change, but for the scheduling
    directives (and template labels and annotations) of a suspended Job that never started."""
    template, before = job["spec"].get("template") or {}, copy.deepcopy(old["spec"].get("template"))
    before = before or {}
    if old["spec"].get("suspend") is True and not (old.get("status") or {}).get("startTime"):
        spec, old_spec = template.get("spec") or {}, before.setdefault("spec", {})
        for key in ("nodeSelector", "tolerations", "schedulingGates"):
            old_spec[key] = spec.get(key)
        old_spec.setdefault("affinity", {})
        old_spec["affinity"] = {**(old_spec["affinity"] or {}), "nodeAffinity": None}
        if spec.get("affinity"):
            old_spec["affinity"]["nodeAffinity"] = spec["affinity"].get("nodeAffinity")
        meta, old_meta = template.get("metadata") or {}, before.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            old_meta[key] = meta.get(key)
    if semantically_equal(template, before):
        return []
    return [invalid("spec.template", template, "field is immutable")]


def validate(obj: dict, old: dict | None = None) -> list[str]:
    """The field errors of `obj` (an UPDATE when `old` is given); [] when it is valid."""
    group = obj.get("apiVersion", "").rpartition("/")[0]
    kind = (group, obj.get("kind", ""))
    meta = obj.get("metadata") or {}
    errors = validate_labels(meta.get("labels"), "metadata.labels")
    errors += validate_annotations(meta.get("annotations"), "metadata.annotations")
    if kind not in TEMPLATES:
        return errors
    path = TEMPLATES[kind]
    at = ".".join(path)
    template = _dig(obj, path) if path else obj
    if path:
        template_meta = (template or {}).get("metadata") or {}
        errors += validate_labels(template_meta.get("labels"), f"{at}.labels")
        errors += validate_annotations(template_meta.get("annotations"), f"{at}.annotations")
    errors += validate_pod_spec((template or {}).get("spec"), f"{at}.spec" if at else "spec")
    if kind == ("batch", "Job") and old is not None:
        errors += validate_job_template_update(obj, old)
    return errors
