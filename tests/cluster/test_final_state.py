"""The final-state check on the real kube-apiserver: the ValidatingAdmissionPolicy that
`lwgpu policy compile` prints for the shipped policy, with the mutating webhook failing open.

The install ships both (deploy/base), and its policy-sync sidecar keeps the check compiled
from the policy served. With the webhook stopped, an object that asks GPU memory reaches
validation unrewritten and the apiserver refuses it with the check's message; objects that
need nothing from lwgpu are created. With the webhook running, the check sees the rewritten
object and lets it through.

kubectl prints a policy's denial as `The pods "gpu" is invalid: : ValidatingAdmissionPolicy
'NAME' with binding 'NAME' denied request: MESSAGE` (staging/src/k8s.io/apiserver/pkg/admission/
plugin/policy/validating/dispatcher.go, `Dispatch`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator

import pytest

from tests.cluster.apiserver_pods import ACK_PLACEMENTS
from tests.support.builders import container, gpu_mem, pod, workload
from tests.support.cluster import Namespace
from tests.support.paths import SHIPPED_POLICY
from tests.support.policies import policy_from_yaml
from tools.cluster.controlplane import ControlPlane
from tools.waiting import wait_for
from webhook.compile import final_state_check
from webhook.compile.final_state import NAME
from webhook.core.decision import decide
from webhook.files import load_policies
from webhook.policy import PolicySet

DENIED = f"ValidatingAdmissionPolicy '{NAME}' with binding '{NAME}' denied request: "
UNREWRITTEN = (
    ", which policy 'default' rewrites to nvidia.com/gpu: 1 on a lightweight GPU class, but"
    " lwgpu did not rewrite this {kind}: its webhook was unavailable, or the request was sent"
    " around it. Retry in a moment; if this persists, ask your cluster admin to check the"
    " lwgpu webhook"
)
POLICIES = load_policies(SHIPPED_POLICY)
SHIPPED = POLICIES.for_namespace("default")
SEED_SELECTOR = {"aliyun.accelerator/nvidia_mem": "2048MiB"}
GPU_MEM_POD = pod(gpu_mem(2))
GPU_MEM_REFUSAL = "lwgpu: spec.containers[0] (cuda) asks GPU memory aliyun.com/gpu-mem=2" + (
    UNREWRITTEN.format(kind="Pod")
)
# Each object, and the message the apiserver refuses it with while the webhook is down
# (None: it is created).
WHILE_DOWN = {
    "gpu memory pod": (GPU_MEM_POD, GPU_MEM_REFUSAL),
    "gpu memory annotation": (
        pod(container(), annotations={"lwgpu.io/gpu-memory": "1536Mi"}),
        "lwgpu: metadata.annotations[lwgpu.io/gpu-memory]=1536Mi asks GPU memory"
        + UNREWRITTEN.format(kind="Pod"),
    ),
    "HAMi memory in an init container": (
        pod(container(), init=(container("warmup", limits={"nvidia.com/gpumem": 3000}),)),
        # the apiserver stores 3000 as 3k; the message shows the units asked
        "lwgpu: spec.initContainers[0] (warmup) asks GPU memory nvidia.com/gpumem=3000"
        + UNREWRITTEN.format(kind="Pod"),
    ),
    "two GPUs on a lightweight class": (
        pod(container(limits={"nvidia.com/gpu": "2"}), node_selector=SEED_SELECTOR),
        "lwgpu: spec: the pod needs 2 GPUs on a lightweight GPU class, whose nodes carry"
        " exactly one GPU (policy 'default' allows 1 per pod); ask for nvidia.com/gpu: 1 or"
        " GPU memory in one container, or split the pod",
    ),
    "whole-gpu pod": (pod(container(limits={"nvidia.com/gpu": "2"})), None),
    "pod in the seed's lightweight form": (
        pod(container(limits={"nvidia.com/gpu": "1"}), node_selector=SEED_SELECTOR),
        None,
    ),
    "pod rewritten by the webhook": (decide(GPU_MEM_POD, SHIPPED).obj, None),
    "cpu pod": (pod(container(limits={"cpu": "1"})), None),
    "skipped pod": (pod(annotations={"lwgpu.io/skip": "true"}), None),
    # leaveAlone.nodeSelectorKeys: only a pod that must land on ACK's nodes is ACK's
    **{
        f"ack.node.gpu.schedule by {case}": (
            pod(gpu_mem(2), **copy.deepcopy(fields)),
            None if left_alone else GPU_MEM_REFUSAL,
        )
        for case, (fields, left_alone) in ACK_PLACEMENTS.items()
    },
}
DEPLOYMENT = workload("apps/v1", "Deployment", pod(gpu_mem(2)))
DEPLOYMENT["spec"]["template"]["metadata"] = {"labels": {"app": "gpu"}}
# The shipped policy with `allowSkip: false`: `lwgpu.io/skip` exempts nothing.
NO_SKIP_YAML = SHIPPED_POLICY.read_text() + "  allowSkip: false\n"
NO_SKIP = PolicySet((policy_from_yaml(NO_SKIP_YAML),))
SKIP = {"lwgpu.io/skip": "true"}
SKIPPING_DEPLOYMENT = copy.deepcopy(DEPLOYMENT)
SKIPPING_DEPLOYMENT["metadata"]["annotations"] = dict(SKIP)
# Objects `lwgpu.io/skip` exempts under the shipped policy, and where they ask GPU memory.
SKIPPING = {
    "pod": (pod(gpu_mem(2), annotations=dict(SKIP)), "spec.containers[0]", "Pod"),
    "deployment": (SKIPPING_DEPLOYMENT, "spec.template.spec.containers[0]", "Deployment"),
}
# 40 init containers (every other one a sidecar) and 60 app containers, one asking memory: every
# expression walks all of them, within the apiserver's cost limits (1,000,000 per expression,
# 10,000,000 per binding: staging/src/k8s.io/apiserver/pkg/apis/cel/config.go).
BIG_POD = pod(
    *(
        gpu_mem(2, f"c{i}") if i == 10 else container(f"c{i}", limits={"cpu": "10m"})
        for i in range(60)
    ),
    init=tuple(
        container(f"i{i}", limits={"cpu": "10m"}, **({"restartPolicy": "Always"} if i % 2 else {}))
        for i in range(40)
    ),
)


def _create(namespace: Namespace, obj: dict, *how: str):
    return namespace.kubectl(*how, "-f", "-", input=json.dumps(obj), check=False)


def _refusal(done) -> str | None:
    """The check's message when the apiserver refused with it, else None."""
    if done.returncode == 0:
        return None
    return done.stderr.strip().partition(DENIED)[2] or done.stderr


def _stored(plane: ControlPlane) -> dict:
    return json.loads(plane.kubectl("get", "validatingadmissionpolicy", NAME, "-o", "json").stdout)


@pytest.fixture(scope="module")
def final_state(lwgpu) -> None:
    """The installed check as the sidecar keeps it: compiled from the shipped policy."""
    wanted = final_state_check(POLICIES)[0]["spec"]["validations"]
    wait_for(lambda: _stored(lwgpu.plane)["spec"]["validations"] == wanted, timeout=30)


@pytest.fixture(scope="class")
def webhook_down(lwgpu, final_state) -> Iterator[None]:
    """Every webhook process stopped for a class's tests, after the check is enforced."""
    lwgpu.stop_webhook()
    try:
        plane = lwgpu.plane
        probe = json.dumps(GPU_MEM_POD)
        # The apiserver takes up a new policy from its informer, a moment after creation.
        wait_for(
            lambda: (
                DENIED
                in plane.kubectl(
                    "create",
                    "-n",
                    "default",
                    "--dry-run=server",
                    "-f",
                    "-",
                    input=probe,
                    check=False,
                ).stderr
            ),
            timeout=30,
            what="the final-state check to be enforced",
        )
        yield
    finally:
        lwgpu.start_webhook()


def test_the_apiserver_type_checks_every_expression_clean(lwgpu, final_state):
    """It checks each expression against the schemas of the kinds it matches and reports in
    `status.typeChecking` (staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/
    validating/typechecking.go)."""
    plane = lwgpu.plane

    def checked():
        stored = _stored(plane)
        status = stored.get("status", {})
        return (
            status if status.get("observedGeneration") == stored["metadata"]["generation"] else None
        )

    assert wait_for(checked, timeout=30)["typeChecking"] == {}  # no expressionWarnings


@pytest.fixture
def no_skip_check(lwgpu, namespace) -> Iterator[str]:
    """The check compiled from `NO_SKIP`, bound to the test's namespace alone; its name."""
    name = "lwgpu-test-no-skip"
    check, binding = final_state_check(NO_SKIP)
    for obj in (check, binding):
        obj["metadata"]["name"] = name
    binding["spec"]["policyName"] = name
    only = {"kubernetes.io/metadata.name": namespace.name}
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": only}}
    objects = json.dumps({"apiVersion": "v1", "kind": "List", "items": [check, binding]})
    lwgpu.plane.kubectl("create", "-f", "-", input=objects)
    try:
        yield name
    finally:
        lwgpu.plane.kubectl("delete", "-f", "-", input=objects)


@pytest.mark.usefixtures("webhook_down")
class TestWebhookDown:
    @pytest.mark.parametrize("case", WHILE_DOWN)
    def test_only_what_lwgpu_must_rewrite_is_refused(self, namespace, case):
        obj, message = WHILE_DOWN[case]

        dry_create = _create(namespace, obj, "create", "--dry-run=server")
        dry_apply = _create(namespace, obj, "apply", "--dry-run=server")
        done = _create(namespace, obj, "create")

        assert [_refusal(d) for d in (done, dry_create, dry_apply)] == [message] * 3, done.stderr
        if message is None:
            assert done.stdout.strip() == "pod/gpu created"

    @pytest.mark.parametrize("case", SKIPPING)
    def test_with_allow_skip_false_a_skipped_object_is_refused(
        self, namespace, no_skip_check, case
    ):
        """`lwgpu.io/skip` passes the shipped check ("skipped pod" above), not one compiled
        from a policy with `allowSkip: false`."""
        obj, field, kind = SKIPPING[case]
        denied = f"ValidatingAdmissionPolicy '{no_skip_check}' with binding '{no_skip_check}'"

        def refused():
            done = _create(namespace, obj, "create", "--dry-run=server")
            return done.stderr if done.returncode else None

        # the apiserver takes up a new policy from its informer, a moment after creation
        stderr = wait_for(refused, timeout=30, what="the check of allowSkip: false")
        message = stderr.strip().partition(f"{denied} denied request: ")[2]
        assert message == f"lwgpu: {field} (cuda) asks GPU memory aliyun.com/gpu-mem=2" + (
            UNREWRITTEN.format(kind=kind)
        )

    def test_a_workload_template_that_asks_memory_is_refused(self, namespace):
        done = _create(namespace, DEPLOYMENT, "create")
        assert _refusal(done) == (
            "lwgpu: spec.template.spec.containers[0] (cuda) asks GPU memory aliyun.com/gpu-mem=2"
            + UNREWRITTEN.format(kind="Deployment")
        )

    def test_a_rewritten_workload_scales_but_its_template_is_checked(self, namespace):
        rewritten = decide(DEPLOYMENT, SHIPPED).obj
        assert _create(namespace, rewritten, "create").returncode == 0
        # an UPDATE that leaves the template as it was is not decided
        assert namespace.kubectl("scale", "deployment/gpu", "--replicas=2").returncode == 0
        # the user's manifest again, asking memory: the template changes back
        again = _create(namespace, DEPLOYMENT, "apply")
        assert (_refusal(again) or "").startswith("lwgpu: spec.template.spec.containers[0]")

    def test_a_pod_of_100_containers_is_decided_not_cut_short(self, namespace):
        refused = _create(namespace, BIG_POD, "create", "--dry-run=server")
        rewritten = _create(namespace, decide(BIG_POD, SHIPPED).obj, "create", "--dry-run=server")

        assert _refusal(refused) == (
            "lwgpu: spec.containers[10] (c10) asks GPU memory aliyun.com/gpu-mem=2"
            + UNREWRITTEN.format(kind="Pod")
        )
        assert rewritten.stdout.strip() == "pod/gpu created (server dry run)", rewritten.stderr

    def test_kube_system_is_never_checked(self, lwgpu):
        kube_system = Namespace("kube-system", lwgpu.plane)
        done = _create(kube_system, GPU_MEM_POD, "create", "--dry-run=server")
        assert done.stdout.strip() == "pod/gpu created (server dry run)"


def test_with_the_webhook_up_the_rewritten_pod_passes_the_check(lwgpu, final_state, namespace):
    dry_apply = _create(namespace, GPU_MEM_POD, "apply", "--dry-run=server")
    done = _create(namespace, GPU_MEM_POD, "create")

    assert dry_apply.stdout.strip() == "pod/gpu created (server dry run)", dry_apply.stderr
    assert done.stdout.strip() == "pod/gpu created", done.stderr
    stored = namespace.get("pod", "gpu")
    assert stored["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert stored["spec"]["nodeSelector"] == SEED_SELECTOR
