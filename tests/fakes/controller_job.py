"""The Job controller, for Pods; a test double of `pkg/controller/job/job_controller.go`.

`sync` is `syncJob` -> `manageJob` for a non-indexed Job whose pods never finish: it records
`status.startTime` when the Job first runs (the status subresource), keeps `spec.parallelism`
(default 1) pods active, each created from the template with `generateName` `<job>-`, a
controller reference and the `batch.kubernetes.io/job-tracking` finalizer
(`podControl.CreatePodsWithGenerateName`), and deletes the active pods of a suspended Job (or
beyond parallelism), taking its finalizer off them as `trackJobStatusAndRemoveFinalizers` does.

Left out: completions, failures and backoff, indexed Jobs, pod failure policies, the labels
the apiserver's Job strategy (`generateSelector`) adds to the template.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import EPOCH, Store
from tests.fakes.controller_utils import key, owned, pod_from_template

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"


@dataclass
class JobController:
    """Syncs Jobs into Pods."""

    store: Store
    refused: list[Result] = field(default_factory=list)

    def sync(self, job: dict) -> int:
        """One `syncJob`; the number of writes it made."""
        if job["metadata"].get("deletionTimestamp"):
            return 0
        namespace = job["metadata"]["namespace"]
        active = owned(self.store.of_kind("", "Pod", namespace), job)
        if job["spec"].get("suspend") is True:
            for pod in active:
                self._delete(pod)
            return len(active)
        writes = 0
        if not (job.get("status") or {}).get("startTime"):
            started = EPOCH.strftime("%Y-%m-%dT%H:%M:%SZ")
            self.store.update_status(key(job), {"startTime": started})
            writes += 1
        parallelism = job["spec"].get("parallelism", 1)
        for _ in range(parallelism - len(active)):
            pod = pod_from_template(job["spec"]["template"], job)
            finalizers = pod["metadata"].setdefault("finalizers", [])
            if TRACKING_FINALIZER not in finalizers:
                finalizers.append(TRACKING_FINALIZER)
            result = self.store.create(pod, namespace)
            writes += 1
            if not result.allowed:
                self.refused.append(result)
                break
        for pod in active[parallelism:]:
            self._delete(pod)
            writes += 1
        return writes

    def _delete(self, pod: dict) -> None:
        """Delete a pod, then let it go: the tracking finalizer comes off once it is counted."""
        self.store.delete(key(pod))
        if self.store.get(key(pod)) is not None:
            self.store.change(key(pod), _untracked)


def _untracked(pod: dict) -> None:
    pod["metadata"]["finalizers"] = [
        f for f in pod["metadata"].get("finalizers", []) if f != TRACKING_FINALIZER
    ]
