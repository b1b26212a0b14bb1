"""The CronJob controller, for Jobs; a test double of `pkg/controller/cronjob`.

The schedule is not read: `run(cronjob, minute)` is the controller's decision that a run is due
at that minute (`cronjob_controllerv2.go` `syncCronJob`), and creates the Job
`getJobFromTemplate2` (utils.go) builds: named `<cronjob>-<minutes since the epoch>`
(`getJobName`), the job template's labels, annotations and spec, the
`batch.kubernetes.io/cronjob-scheduled-timestamp` annotation and a controller reference. A Job
CREATE the webhooks see; one that exists already means the run happened.

Left out: parsing the schedule, concurrency policies, history limits, missed-run deadlines.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import timedelta

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import EPOCH, Store, StoreError
from tests.fakes.controller_utils import controller_ref

SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def job_from_template(cronjob: dict, minute: int) -> dict:
    """`getJobFromTemplate2` for the run at `minute` (minutes since the Unix epoch)."""
    template = cronjob["spec"]["jobTemplate"]
    meta = template.get("metadata") or {}
    scheduled = EPOCH.replace(year=1970) + timedelta(minutes=minute)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{cronjob['metadata']['name']}-{minute}",
            "labels": copy.deepcopy(meta.get("labels") or {}),
            "annotations": {
                **copy.deepcopy(meta.get("annotations") or {}),
                SCHEDULED: scheduled.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "ownerReferences": [controller_ref(cronjob)],
        },
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


@dataclass
class CronJobController:
    """Creates the Jobs of CronJobs' runs."""

    store: Store
    refused: list[Result] = field(default_factory=list)

    def run(self, cronjob: dict, minute: int) -> dict | None:
        """The run at `minute`: the Job created (or already there), None when refused."""
        if cronjob["spec"].get("suspend") is True:
            return None
        job = job_from_template(cronjob, minute)
        try:
            result = self.store.create(job, cronjob["metadata"]["namespace"])
        except StoreError as error:
            if error.reason != "AlreadyExists":
                raise
            return self.store.get(
                ("batch", "Job", cronjob["metadata"]["namespace"], job["metadata"]["name"])
            )
        if not result.allowed:
            self.refused.append(result)
            return None
        return result.obj
