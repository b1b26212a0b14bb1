"""The table of tests/cluster/test_lifecycle.py: what users and controllers do to a workload
that existed before lwgpu was installed, and how it must end on the real control plane.

Each case is one workload named `gpu` in a namespace of its own, asking
`aliyun.com/gpu-mem: 2` (GiB) in its pod template. A step is what a person types (`kubectl
scale`, `label`, `rollout restart`, `set image`, `apply` of a changed file, client-side or
server-side, `delete`, `create job --from`), sometimes followed by an await of what the
controllers then do.

What kube-controller-manager does without a kubelet decides some cases' ends (pods are bound by
kube-scheduler but never run, so never become Ready):
- A Deployment's rolling update (maxSurge 25% rounded up = 1, maxUnavailable 25% rounded down
  = 0 for 1 replica: pkg/apis/apps/v1/defaults.go `SetDefaults_Deployment`,
  pkg/controller/deployment/util/deployment_util.go `ResolveFenceposts`) creates the new
  ReplicaSet with one surge pod and never scales the old one down, since no new pod becomes
  available (pkg/controller/deployment/rolling.go `reconcileOldReplicaSets`: maxScaledDown =
  all pods - minAvailable - unavailable new pods = 0). Only an old ReplicaSet whose pods are
  all unavailable is cleaned up when a further template change rolls over
  (`cleanupUnhealthyReplicas`). So a case checks the newest ReplicaSet's pods, not the end of a
  rollout.
- A StatefulSet with the default `podManagementPolicy: OrderedReady` never creates pod 1
  before pod 0 is Running and Ready (pkg/controller/statefulset/stateful_set_control.go
  `processReplica`, monotonic unless `allowsBurst`): the cases use `Parallel`.
- A bound pod's deletion waits for its kubelet (pkg/registry/core/pod/strategy.go
  `CheckGracefulDelete`; an unbound pod is deleted at once); the test does the kubelet's last
  step for it (see workload_state.py `confirm_terminations`).
- The CronJob controller runs a Job only at a scheduled minute; the cases create the run as
  `kubectl create job --from=cronjob/gpu` does (staging/src/k8s.io/kubectl/pkg/cmd/create/
  create_job.go `createJobFromCronJob`: the CronJob's jobTemplate, owned by the CronJob) and
  keep the CronJob `suspend`ed so that no scheduled run adds pods during a case.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tests.support.builders import gpu_mem, pod, workload

NAME = "gpu"
KINDS = {  # kind -> (apiVersion, where its pod template sits)
    "Deployment": ("apps/v1", ("spec", "template")),
    "StatefulSet": ("apps/v1", ("spec", "template")),
    "Job": ("batch/v1", ("spec", "template")),
    "CronJob": ("batch/v1", ("spec", "jobTemplate", "spec", "template")),
}
# The label the second webhook's objectSelector matches (second_webhook.py `SecondWebhook`).
SECOND = {"lwgpu-test/gpumem": "4096"}
FINALIZER = "example.com/protect"
NEW_IMAGE = "nvidia/cuda:12.6.0-base-ubuntu22.04"


def template_of(obj: dict) -> dict:
    """The pod template of a workload of one of KINDS."""
    for key in KINDS[obj["kind"]][1]:
        obj = obj[key]
    return obj


def manifest(
    kind: str,
    namespace: str,
    gib: int = 2,
    *,
    replicas: int | None = None,
    second: bool = False,
    finalizer: bool = False,
) -> dict:
    """The user's file: a `kind` named `gpu` asking `aliyun.com/gpu-mem: gib`."""
    obj = workload(KINDS[kind][0], kind, pod(gpu_mem(gib)), name=NAME)
    obj["metadata"]["namespace"] = namespace
    if replicas is not None:
        obj["spec"]["replicas"] = replicas
    template = template_of(obj)
    template["metadata"] = {"labels": {"app": NAME}}
    if second:
        obj["metadata"]["labels"] = dict(SECOND)
        template["metadata"]["labels"].update(SECOND)
    if finalizer:
        obj["metadata"]["finalizers"] = [FINALIZER]
    if kind in ("Job", "CronJob"):  # a Job's pods may not restart Always (batch validation)
        template["spec"]["restartPolicy"] = "Never"
    if kind == "Job":
        # Two completions, one at a time: a Job without completions is defaulted to 1
        # (pkg/apis/batch/v1/defaults.go `SetDefaults_Job`), and then parallelism 2 makes no pod.
        obj["spec"].update(completions=2, parallelism=1)
    if kind == "StatefulSet":
        obj["spec"]["podManagementPolicy"] = "Parallel"
    if kind == "CronJob":
        obj["spec"]["suspend"] = True
    return obj


@dataclass(frozen=True)
class Step:
    """One thing done after the install: kubectl's arguments in the case's namespace
    (`{kind}` is the workload's kind), with the file asking `gib` GiB (and `replicas`) on
    stdin when it is an apply; `until_gone`: then wait until the workload is deleted."""

    words: str
    args: tuple[str, ...]
    gib: int | None = None
    replicas: int | None = None
    until_gone: bool = False

    def argv(self, kind: str) -> list[str]:
        return [a.replace("{kind}", kind.lower()) for a in self.args]


def scale(replicas: int) -> Step:
    return Step(
        f"kubectl scale {replicas}", ("scale", f"{{kind}}/{NAME}", f"--replicas={replicas}")
    )


def hpa(replicas: int) -> Step:
    """What a HorizontalPodAutoscaler sends: the scale subresource of its target."""
    body = json.dumps({"spec": {"replicas": replicas}})
    args = ("patch", f"{{kind}}/{NAME}", "--subresource=scale", "--type=merge", "-p", body)
    return Step(f"scale subresource {replicas}", args)


def apply(gib: int) -> Step:
    return Step(f"apply {gib}", ("apply", "-f", "-"), gib)


def server_apply(gib: int) -> Step:
    return Step(f"apply --server-side {gib}", ("apply", "--server-side", "-f", "-"), gib)


LABEL = Step("kubectl label", ("label", f"{{kind}}/{NAME}", "team=ml"))
RESTART = Step("rollout restart", ("rollout", "restart", f"{{kind}}/{NAME}"))
SET_IMAGE = Step("set image", ("set", "image", f"{{kind}}/{NAME}", f"cuda={NEW_IMAGE}"))
DELETE = Step("delete", ("delete", f"{{kind}}/{NAME}", "--wait=false"))
RELEASE = Step(
    "finalizer removed",
    (
        "patch",
        f"{{kind}}/{NAME}",
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    ),
    until_gone=True,
)
ORPHAN = Step(
    "delete --cascade=orphan",
    ("delete", f"{{kind}}/{NAME}", "--cascade=orphan", "--wait=false"),
    until_gone=True,
)
SCALE_REPLICA_SET = Step(
    "scale its ReplicaSet 2", ("scale", "replicaset", "-l", f"app={NAME}", "--replicas=2")
)
PARALLELISM = Step("parallelism 2", ("patch", f"job/{NAME}", "-p", '{"spec":{"parallelism":2}}'))
RUN = Step("create job --from", ("create", "job", "gpu-run", f"--from=cronjob/{NAME}"))


@dataclass(frozen=True)
class Case:
    """What is done to a workload after the install, and how it must end.

    `outcome`: the last step's, "patched" (kubectl printed lwgpu's rewrite warning),
    "unpatched" (no lwgpu warning) or the words of a refusal. `template`: GiB of the class the
    stored template ends on (None: as stored before the install). `pods`: the classes (GiB)
    of the pods created after the install by the current revision (the newest ReplicaSet, the
    StatefulSet's update revision, the Job, the CronJob's run); `pending` of them stay Pending
    for want of an `nvidia.com/gpu` on their class (two nodes per class), the rest are bound.
    `replica_sets`: a Deployment's ReplicaSets at the end (1 + the template changes; 0 once
    the garbage collector deleted them).
    `created`: "apply", "apply --server-side" (both before the install) or "after" (`kubectl
    apply` after it). `second`: a second mutating webhook after lwgpu's adds
    `nvidia.com/gpumem: 4096` to containers asking `nvidia.com/gpu`.
    """

    kind: str
    steps: tuple[Step, ...]
    outcome: str
    template: int | None = None
    pods: tuple[int, ...] = ()
    pending: int = 0
    replica_sets: int = 1
    created: str = "apply"
    finalizer: bool = False
    gone: bool = False
    second: bool = False


IMMUTABLE = "field is immutable"
SSA = "apply --server-side"
D, S, J, C = "Deployment", "StatefulSet", "Job", "CronJob"
CASES = {
    # Deployment: scaling and metadata leave the template alone; its ReplicaSet's new pods are
    # decided at Pod CREATE. Two 2048MiB nodes: the third new pod stays Pending.
    "Deployment kubectl scale 4": Case(D, (scale(4),), "unpatched", None, (2, 2, 2), pending=1),
    "Deployment scale subresource": Case(D, (hpa(2),), "unpatched", None, (2,)),
    "Deployment replicas by apply": Case(
        D, (Step("apply replicas 2", ("apply", "-f", "-"), 2, replicas=2),), "unpatched", None, (2,)
    ),
    "Deployment label": Case(D, (LABEL,), "unpatched"),
    "Deployment delete, finalizer removed": Case(
        D, (DELETE, RELEASE), "unpatched", replica_sets=0, finalizer=True, gone=True
    ),
    # The garbage collector takes the ownerReference off the ReplicaSet (an UPDATE lwgpu
    # reviews) before it lets the Deployment go (pkg/controller/garbagecollector/
    # garbagecollector.go `orphanDependents`); the orphan's new pods are decided at CREATE.
    "Deployment delete --cascade=orphan, scale the ReplicaSet": Case(
        D, (ORPHAN, SCALE_REPLICA_SET), "unpatched", None, (2,), gone=True
    ),
    # A template change is rewritten: one new ReplicaSet, on the class the change asks.
    "Deployment rollout restart": Case(D, (RESTART,), "patched", 2, (2,), replica_sets=2),
    "Deployment set image": Case(D, (SET_IMAGE,), "patched", 2, (2,), replica_sets=2),
    "Deployment apply 2->4->1": Case(D, (apply(4), apply(1)), "patched", 1, (1,), replica_sets=3),
    # kubectl's three-way merge adds gpu-mem back to the rewritten template; lwgpu takes it
    # out again, so the template is unchanged and no ReplicaSet is made.
    "Deployment apply 2->4->4": Case(D, (apply(4), apply(4)), "patched", 4, (4,), replica_sets=2),
    "Deployment server-side 2->4->1": Case(
        D, (server_apply(4), server_apply(1)), "patched", 1, (1,), replica_sets=3, created=SSA
    ),
    "Deployment created after the install, apply 2->4": Case(
        D, (apply(4),), "patched", 4, (4,), replica_sets=2, created="after"
    ),
    # A second webhook after lwgpu's asks 4 GiB: lwgpu, reinvoked, chooses 4096MiB.
    "Deployment kubectl scale, second webhook": Case(
        D, (scale(2),), "unpatched", None, (4,), second=True
    ),
    "Deployment set image, second webhook": Case(
        D, (SET_IMAGE,), "patched", 4, (4,), replica_sets=2, second=True
    ),
    # The label's UPDATE gets gpumem from the second webhook; lwgpu's reinvocation takes it
    # out, so the template stays as it was: no ReplicaSet for a label.
    "Deployment set image, label, second webhook": Case(
        D, (SET_IMAGE, LABEL), "patched", 4, (4,), replica_sets=2, second=True
    ),
    # StatefulSet: pods are replaced from the template on a change, never by a ReplicaSet.
    "StatefulSet kubectl scale 2": Case(S, (scale(2),), "unpatched", None, (2,)),
    "StatefulSet scale subresource": Case(S, (hpa(2),), "unpatched", None, (2,)),
    "StatefulSet label": Case(S, (LABEL,), "unpatched"),
    "StatefulSet rollout restart": Case(S, (RESTART,), "patched", 2, (2,)),
    "StatefulSet set image": Case(S, (SET_IMAGE,), "patched", 2, (2,)),
    "StatefulSet apply 2->4->1": Case(S, (apply(4), apply(1)), "patched", 1, (1,)),
    "StatefulSet server-side 2->4->1": Case(
        S, (server_apply(4), server_apply(1)), "patched", 1, (1,), created=SSA
    ),
    # Job: its template is immutable; the apiserver refuses a change, lwgpu never does.
    "Job label": Case(J, (LABEL,), "unpatched"),
    "Job delete, finalizer removed": Case(
        J, (DELETE, RELEASE), "unpatched", finalizer=True, gone=True
    ),
    "Job parallelism 2": Case(J, (PARALLELISM,), "unpatched", None, (2,)),
    "Job apply 2->4": Case(J, (apply(4),), IMMUTABLE),
    "Job set image": Case(J, (SET_IMAGE,), IMMUTABLE),
    "Job server-side 2->4": Case(J, (server_apply(4),), IMMUTABLE, created=SSA),
    # CronJob: its Jobs are left alone, their pods decided at Pod CREATE.
    "CronJob label": Case(C, (LABEL,), "unpatched"),
    "CronJob create job --from": Case(C, (RUN,), "unpatched", None, (2,)),
    "CronJob set image, create job --from": Case(C, (SET_IMAGE, RUN), "unpatched", 2, (2,)),
    "CronJob apply 2->4->1, create job --from": Case(
        C, (apply(4), apply(1), RUN), "unpatched", 1, (1,)
    ),
    "CronJob server-side 2->4->1, create job --from": Case(
        C, (server_apply(4), server_apply(1), RUN), "unpatched", 1, (1,), created=SSA
    ),
}
