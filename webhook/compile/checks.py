"""The final-state checks in CEL: what the apiserver refuses after every mutation has run.

The webhook rewrites a pod that asks GPU memory into one that asks `nvidia.com/gpu: 1` on
a class, and refuses one that needs more GPUs than a lightweight node has. So an object
that reaches validation still asking memory was not rewritten: the webhook was down
(`failurePolicy: Ignore`), or the request went around it. Four checks, each as the
webhook reads the pod (`webhook.core.asks`, `webhook.core.placement`):

- **memory resource**: no container or init container names a memory resource of the
  governing policy in its limits or requests (a rewrite removes them all);
- **memory annotation**: a pod that asks by the policy's annotation (which a rewrite leaves
  in place) is as the webhook's rewrite leaves it: the rewrite would change nothing
  (`webhook.compile.patch`); with `placement: spillOver`, whose affinity the patch does not
  write, it carries the `lwgpu.io/profile` of a class that holds the ask;
- **GPU count**: a pod that asks memory, or pins lightweight classes as the webhook reads
  pins (`webhook.compile.placement`), needs at most `maxGPUsPerPod` GPUs by Kubernetes'
  effective-request rule (`asks.effective_gpus`);
- **bound to a node**: a pod with `spec.nodeName` that the rewrite would still change, which
  the webhook refuses rather than move (`placement: exact`).

With `whenNoProfileFits: ignore`, a pod whose largest ask fits no class passes the first
two where the webhook leaves it unchanged: it reads the asks without refusing, and the pod
pins no class outside the policy (`placement`'s `unfitting`). Pods another GPU-sharing
system owns (`leaveAlone`) and pods that ask no GPU are outside the scope, as for the
webhook.

Not checked: the keep-off affinity that `wholeGPUPods: avoidLightweight` adds to whole-GPU
pods. Missing it, a pod asking whole GPUs may land on a lightweight node and run there; it
never sits Pending, and refusing it would refuse whole-GPU pods whenever the webhook is
down, which the final-state check exists to stop.
"""

from __future__ import annotations

from typing import TypedDict

from webhook.api.names import CONTAINER_ANNOTATION, GPU_RESOURCE, PROFILE_ANNOTATION

from .cel import Named, dig, string

GPU = string(GPU_RESOURCE)
PROFILE = string(PROFILE_ANNOTATION)
CONTAINER = string(CONTAINER_ANNOTATION)
ASK = "variables.annotationAsk"
NODE = "variables.spec.nodeName"
# A size the webhook reads (`quantity.parse`: at most 64 characters, below 2^63).
LARGEST_SIZE = string("8Ei")
SMALLEST_SIZE = string("1Mi")
TERMS = (
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
)
# What the user reads when the webhook did not rewrite the object: why, and what to do.
UNREWRITTEN = (
    ", but lwgpu did not rewrite this {kind}: its webhook was unavailable, or the request "
    "was sent around it. Retry in a moment; if this persists, ask your cluster admin to "
    "check the lwgpu webhook"
)


class Validation(TypedDict):
    """One check: an expression that must hold, and what to say when it does not."""

    expression: str
    message: str
    messageExpression: str


def count(value: str) -> str:
    """A device count as the webhook reads it (`quantity.count`); 0 when it is none."""
    text = f"string({value})"
    return (
        f"(isQuantity({text}) && quantity({text}).isInteger() ? quantity({text}).asInteger() : 0)"
    )


def short(text: str, limit: int = 40) -> str:
    """User text cut for a message (`webhook.api.text.shorten`)."""
    return f"({text}.size() > {limit} ? {text}.substring(0, {limit - 1}) + '…' : {text})"


def amount(text: str) -> str:
    """A resource value in its units, as `quantity.amount` shows it: the apiserver stores
    `nvidia.com/gpumem: 3000` as `3k`; a binary size (`2Gi`) stays as written."""
    return (
        f"(!{text}.matches('[KMGTPE]i$') && isQuantity({text}) && quantity({text}).isInteger()"
        f" ? string(quantity({text}).asInteger()) : {text})"
    )


def _sidecar(container: str) -> str:
    return f"(has({container}.restartPolicy) && {container}.restartPolicy == 'Always')"


def value_of(index: str, resource: str) -> str:
    """Container `index`'s value of `resource`: limits, else requests (`asks._value`)."""
    return (
        f"({resource} in variables.limits[{index}] ? variables.limits[{index}][{resource}]"
        f" : variables.requests[{index}][{resource}])"
    )


def check_variables() -> list[Named]:
    """What the checks read, computed once: resources and asks per container, GPUs."""
    return [
        {"name": "limits", "expression": f"variables.containers.map(c, {_limits('c')})"},
        {"name": "requests", "expression": f"variables.containers.map(c, {_requests('c')})"},
        {
            # per container, the memory resources of the governing policy it names
            "name": "memoryKeys",
            "expression": "variables.limits.transformList(i, l, variables.memoryResources"
            ".filter(r, r in l || r in variables.requests[i]))",
        },
        {
            "name": "annotated",
            "expression": "variables.memoryAnnotation != ''"
            " && variables.memoryAnnotation in variables.annotations",
        },
        {
            "name": "annotationAsk",
            "expression": "variables.annotated"
            " ? string(variables.annotations[variables.memoryAnnotation]) : ''",
        },
        {"name": "labels", "expression": dig("variables.template", ("metadata", "labels"), "{}")},
        {"name": "selector", "expression": dig("variables.spec", ("nodeSelector",), "{}")},
        {"name": "terms", "expression": dig("variables.spec", TERMS, "[]")},
        {"name": "target", "expression": _annotation_target()},
        {
            # per container, whether it asks GPU memory (the webhook's `Ask.memory_mib`)
            "name": "memoryAsked",
            "expression": "variables.memoryKeys.transformList(i, k,"
            " size(k) > 0 || i == variables.target)",
        },
        {
            # the annotation is a size of at least 1Mi and names a container (`asks.
            # _annotation_memory`): true without the annotation
            "name": "annotationValid",
            "expression": f"!variables.annotated || (variables.target >= 0 && size({ASK}) <= 64"
            f"\n  && isQuantity({ASK}) && quantity({ASK}).compareTo(quantity({SMALLEST_SIZE}))"
            f" >= 0\n  && quantity({ASK}).isLessThan(quantity({LARGEST_SIZE})))",
        },
        {
            # per container, the GPUs it occupies: its nvidia.com/gpu, at least 1 if it asks
            # memory (by a resource, or as the annotation's container)
            "name": "gpus",
            "expression": "variables.limits.transformList(i, l, [\n  "
            f"{GPU} in l ? {count(f'l[{GPU}]')}\n  : {GPU} in variables.requests[i]"
            f" ? {count(f'variables.requests[i][{GPU}]')} : 0,\n"
            "  variables.memoryAsked[i] ? 1 : 0].max())",
        },
        {
            # the init containers that run beside the app as sidecars and occupy a GPU
            "name": "gpuSidecars",
            "expression": "variables.initContainers.transformList(j, d,"
            f" {_sidecar('d')} && variables.gpus[j] > 0, j)",
        },
        {
            # asks.effective_gpus: each init container beside the sidecars started before it;
            # the app containers beside every sidecar. Only containers that occupy a GPU are
            # paired, so the cost grows with GPU users, not with containers.
            "name": "neededGPUs",
            "expression": "(variables.initContainers.transformList(i, c, !"
            f"{_sidecar('c')} && variables.gpus[i] > 0,\n  variables.gpus[i]"
            " + variables.gpuSidecars.filter(j, j < i).map(j, variables.gpus[j]).sum())\n"
            "+ [variables.gpus.transformList(i, g, i >= size(variables.initContainers), g).sum()"
            "\n  + variables.gpuSidecars.map(j, variables.gpus[j]).sum()]).max()",
        },
        *_memory_ask(),
    ]


def _annotation_target() -> str:
    """The index in `containers` of the container the memory annotation asks for
    (`asks._annotation_target`): the one `lwgpu.io/container` names, app containers first,
    else the only app container; -1 without the annotation, -2 when it names none."""
    init = "size(variables.initContainers)"
    named = dig("c", ("name",), "''")
    wanted = f"variables.annotations[{CONTAINER}]"
    return (
        f"!variables.annotated ? -1\n: !({CONTAINER} in variables.annotations)"
        f" ? (size(variables.appContainers) == 1 ? {init} : -2)\n"
        f": (variables.appContainers.transformList(i, c, {named} == {wanted}, i + {init})\n"
        f"  + variables.initContainers.transformList(i, c, {named} == {wanted}, i) + [-2])[0]"
    )


def _limits(container: str) -> str:
    return dig(container, ("resources", "limits"), "{}")


def _requests(container: str) -> str:
    return dig(container, ("resources", "requests"), "{}")


def scope_variables() -> list[Named]:
    """The policy-dependent part of the scope: the pod asks a GPU, and is lwgpu's to decide;
    `decided` is the whole scope, which every check is conditioned on."""
    expressions = dig("t", ("matchExpressions",), "[]")
    scheduler = dig("variables.spec", ("schedulerName",), "''")
    return [
        {
            "name": "asksGPU",
            "expression": "variables.annotated || variables.memoryKeys.exists(k, size(k) > 0)"
            f"\n|| variables.limits.exists(l, {GPU} in l)"
            f" || variables.requests.exists(r, {GPU} in r)",
        },
        {
            # sharing.other_system
            "name": "leftAlone",
            "expression": f"{scheduler} in variables.leaveSchedulers"
            "\n|| (size(variables.leavePodLabels) > 0 && variables.leavePodLabels.all(k,"
            " k in variables.labels && variables.labels[k] == variables.leavePodLabels[k]))"
            # a key every node the pod may land on carries (`scheduling.required_keys`): in
            # the nodeSelector, or required by each term, by any operator but the two a node
            # without it satisfies
            "\n|| variables.leaveNodeKeys.exists(k, k in variables.selector"
            "\n  || (size(variables.terms) > 0 && variables.terms.all(t,"
            f" {expressions}.exists(e,\n    has(e.key) && e.key == k"
            " && !(has(e.operator) && e.operator in ['NotIn', 'DoesNotExist'])))))",
        },
        {
            "name": "decided",
            "expression": "variables.templateWritten"
            " && !(variables.skipped && variables.allowSkip)"
            " && variables.asksGPU && !variables.leftAlone",
        },
    ]


def _memory_ask() -> list[Named]:
    """For the message: the first container that names a memory resource, and its ask."""
    asker = "variables.asker"
    init = "size(variables.initContainers)"
    name = dig(f"variables.containers[{asker}]", ("name",), "''")
    resource = "variables.askedResource"
    return [
        {
            "name": "asker",
            "expression": "(variables.memoryKeys.transformList(i, k, size(k) > 0, i) + [-1])[0]",
        },
        {
            "name": "askedResource",
            "expression": f"{asker} < 0 ? '' : variables.memoryKeys[{asker}][0]",
        },
        {
            "name": "askedValue",
            "expression": f"{asker} < 0 ? '' : string({value_of(asker, resource)})",
        },
        {"name": "askedAmount", "expression": amount("variables.askedValue")},
        {
            # `spec.containers[0] (cuda) asks GPU memory aliyun.com/gpu-mem=2`
            "name": "memoryAsk",
            "expression": f"{asker} < 0 ? '' : ({asker} < {init}"
            f" ? 'spec.initContainers[' + string({asker}) + ']'"
            f"\n  : 'spec.containers[' + string({asker} - {init}) + ']')"
            f" + ' (' + {name} + ') asks GPU memory '\n  + {resource} + '='"
            f" + {short('variables.askedAmount')}",
        },
    ]


def _unrewritten() -> str:
    head, tail = UNREWRITTEN.split("{kind}")
    return f"{string(head)} + request.kind.kind + {string(tail)}"


def validations() -> list[Validation]:
    """The checks, each with a message that names the field and says what to do."""
    return [
        {
            "expression": "!variables.decided || variables.unfitting"
            " || !variables.memoryKeys.exists(k, size(k) > 0)",
            "message": "lwgpu: a container asks GPU memory" + UNREWRITTEN.format(kind="object"),
            "messageExpression": "'lwgpu: ' + variables.fieldPrefix + variables.memoryAsk"
            "\n+ ', which policy \\'' + variables.policyName + '\\' rewrites to "
            f"{GPU_RESOURCE}: 1 on a lightweight GPU class'\n+ {_unrewritten()}",
        },
        {
            # with placement exact, in the form the webhook's rewrite leaves: it would change
            # nothing (`patch`); with spillOver, on the class `lwgpu.io/profile` names
            "expression": "!variables.decided || !variables.annotated || variables.unfitting"
            "\n|| (variables.exactPlacement ? variables.rewritable && variables.changes == 0"
            f"\n  : variables.annotationValid && {PROFILE} in variables.annotations"
            f" && variables.annotations[{PROFILE}] in variables.classMemory"
            "\n  && isQuantity(variables.annotationAsk) && quantity(variables.annotationAsk)"
            f".compareTo(quantity(variables.classMemory[variables.annotations[{PROFILE}]])) <= 0)",
            "message": "lwgpu: the pod's GPU memory annotation asks GPU memory"
            + UNREWRITTEN.format(kind="object"),
            "messageExpression": "'lwgpu: ' + variables.fieldPrefix + 'metadata.annotations['"
            " + variables.memoryAnnotation + ']=' + "
            f"{short('variables.annotationAsk')}\n+ ' asks GPU memory, which policy \\''"
            " + variables.policyName + '\\' rewrites to "
            f"{GPU_RESOURCE}: 1 on a lightweight GPU class'\n+ {_unrewritten()}",
        },
        {
            "expression": "!variables.decided || !(variables.memoryAsked.exists(a, a)"
            " || (!variables.pinsNone && variables.admitted.exists(a, a)))"
            "\n|| variables.neededGPUs <= variables.maxGPUs",
            "message": "lwgpu: the pod needs more GPUs than a lightweight GPU node carries",
            "messageExpression": "'lwgpu: ' + variables.fieldPrefix + 'spec: the pod needs '"
            " + string(variables.neededGPUs) + ' GPUs on a lightweight GPU class, whose nodes"
            " carry exactly one GPU (policy \\'' + variables.policyName + '\\' allows '"
            " + string(variables.maxGPUs) + ' per pod); ask for "
            f"{GPU_RESOURCE}: 1 or GPU memory in one container, or split the pod'",
        },
        {
            # decision._decide_gpu_pod: a rewrite cannot move a pod already bound to a node
            "expression": "!variables.decided || !variables.exactPlacement"
            " || !variables.boundToNode || !variables.rewritable || variables.changes == 0",
            "message": "lwgpu: the pod is bound to a node but must be placed on a lightweight"
            " GPU class; remove spec.nodeName",
            # The apiserver evaluates every messageExpression on every request, not only for a
            # refusal (policy/validating/validator.go, Validate): unguarded, this one fails
            # ("no such key: nodeName") on each unbound pod, and costs a lookup for nothing.
            "messageExpression": "!variables.boundToNode ? '' : "
            "'lwgpu: ' + variables.fieldPrefix + 'spec.nodeName: the pod is"
            f" bound to node \\'' + {short(NODE)} + '\\' but must be placed on lightweight GPU"
            " class ' + variables.classNames[variables.choice] + '; remove spec.nodeName'",
        },
    ]
