"""Whether a node takes a pod beyond its labels: its taints and its extended resources.

Two of kube-scheduler's Filter plugins, as `--nodes FILE` can follow them from a snapshot of
Nodes (labels are `webhook.scheduling`'s):
- TaintToleration (pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go
  `Filter`): every NoSchedule and NoExecute taint of the node must be tolerated by one of
  the pod's tolerations; PreferNoSchedule only scores. A toleration tolerates a taint as
  k8s.io/api/core/v1 toleration.go `ToleratesTaint` says: its effect empty or equal, its key
  empty or equal, then `Exists` matches every value and `Equal` (or no operator) the same
  value; any other operator (`Gt`/`Lt`, behind a feature gate) is read as tolerating none.
- NodeResourcesFit (noderesources/fit.go `fitsRequest`): every extended resource (a name with
  a `/`) the pod requests must be in the node's allocatable. What other pods already take
  is not counted: the file is a snapshot of nodes, not of the pods on them.

What a pod requests is Kubernetes' effective request (k8s.io/component-helpers/resource/
helpers.go `PodRequests`): app containers together with every sidecar (an init container
with `restartPolicy: Always`), or an init container beside the sidecars started before it,
whichever is larger. `effective` is that rule; the decision counts GPUs with it too.

Imports: `webhook.api` and the standard library. No I/O, no module state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple

from webhook.api import quantity
from webhook.api.workload import as_map
from webhook.policy import frozen_map

FILTERING = ("NoSchedule", "NoExecute")  # the effects TaintToleration's Filter reads


class Taint(NamedTuple):
    """One taint of a node's `spec.taints`."""

    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        """As `kubectl taint` writes it: `key=value:Effect` (`key:Effect` without a value)."""
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


@dataclass(frozen=True)
class Node:
    """A Node as the scheduler's filters read it: labels, taints and allocatable (None when
    the snapshot gives neither `status.allocatable` nor `status.capacity`: not checked)."""

    labels: Mapping[str, str] = field(default_factory=frozen_map)
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, Decimal] | None = None


def read_node(node: Mapping[str, Any]) -> Node:
    """A Node object's labels, taints and allocatable; a node's allocatable is its
    capacity where the snapshot lists only that (a hand-written file: the kubelet posts both,
    equal for extended resources). Values that are no quantity are left out."""
    labels = as_map(as_map(node.get("metadata")).get("labels"))
    raw_taints = as_map(node.get("spec")).get("taints")
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in (raw_taints if isinstance(raw_taints, list) else [])
        if isinstance(t, dict)
    )
    status = as_map(node.get("status"))
    resources = status.get("allocatable", status.get("capacity"))
    allocatable = None
    if isinstance(resources, dict):
        allocatable = {}
        for name, value in resources.items():
            try:
                allocatable[str(name)] = quantity.parse(value)
            except quantity.QuantityError:
                continue
    return Node(
        frozen_map({k: v for k, v in labels.items() if isinstance(v, str)}),
        taints,
        None if allocatable is None else frozen_map(allocatable),
    )


def tolerates(toleration: Any, taint: Taint) -> bool:
    """True when the toleration tolerates the taint (toleration.go `ToleratesTaint`)."""
    if not isinstance(toleration, Mapping):
        return False
    effect, key = toleration.get("effect") or "", toleration.get("key") or ""
    if (effect and effect != taint.effect) or (key and key != taint.key):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == taint.value


def untolerated(tolerations: Iterable[Any], node: Node) -> list[Taint]:
    """The node's NoSchedule and NoExecute taints that none of `tolerations` tolerates."""
    held = list(tolerations)
    return [
        taint
        for taint in node.taints
        if taint.effect in FILTERING and not any(tolerates(t, taint) for t in held)
    ]


def effective(steps: Iterable[tuple[bool, bool, Decimal]]) -> Decimal:
    """A pod's effective request of one resource from its containers in order, each as
    (init container?, sidecar?, amount): `PodRequests`' rule (the module's docstring)."""
    init_peak = sidecars = app = Decimal(0)
    for init, sidecar, amount in steps:
        if not init:
            app += amount
        elif sidecar:
            sidecars += amount
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, amount + sidecars)
    return max(init_peak, app + sidecars)


def _asked(container: Any) -> dict[str, Decimal]:
    """A container's extended-resource requests; a limit without a request is the request
    (pkg/apis/core/v1/defaults.go `SetDefaults_Pod`). Unparsable values are the
    apiserver's to refuse, not counted here."""
    resources = as_map(as_map(container).get("resources"))
    asked = {**as_map(resources.get("limits")), **as_map(resources.get("requests"))}
    found = {}
    for name, value in asked.items():
        if "/" in str(name):
            try:
                found[str(name)] = quantity.parse(value)
            except quantity.QuantityError:
                continue
    return found


def extended_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """The pod spec's effective request of every extended resource it asks (above zero)."""
    steps: list[tuple[bool, bool, dict[str, Decimal]]] = []
    for section in ("initContainers", "containers"):
        containers = spec.get(section)
        for container in containers if isinstance(containers, list) else []:
            sidecar = section == "initContainers" and as_map(container).get("restartPolicy")
            steps.append((section == "initContainers", sidecar == "Always", _asked(container)))
    names = sorted({name for _, _, asked in steps for name in asked})
    totals = {n: effective((i, s, a.get(n, Decimal(0))) for i, s, a in steps) for n in names}
    return {name: total for name, total in totals.items() if total > 0}


def missing(spec: Mapping[str, Any], node: Node) -> list[str]:
    """The extended resources the pod requests beyond the node's allocatable, as
    `fitsRequest` names them ("Insufficient R"): `R` (asks 2, allocatable 1)."""
    if node.allocatable is None:
        return []
    return [
        f"{name} (asks {quantity.amount(str(asked))}, allocatable "
        f"{quantity.amount(str(node.allocatable.get(name, 0)))})"
        for name, asked in extended_requests(spec).items()
        if asked > node.allocatable.get(name, Decimal(0))
    ]
