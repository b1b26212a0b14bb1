"""The controllers together, as kube-controller-manager runs them; a test double.

`reconcile` syncs every Deployment, ReplicaSet, StatefulSet and Job in the store, round after
round, until a round writes nothing (the controllers' informers would see no more events) or
`rounds` run out: `settled` is False then, and a loop such as ReplicaSet churn shows in
`replica_sets_created`. `run_cronjob` is one scheduled run of a CronJob. What any controller was
refused (a Pod CREATE a webhook denied, say) is in `refused`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from tests.fakes.apiserver_harness import Result
from tests.fakes.apiserver_store import Key, Store
from tests.fakes.controller_cronjob import CronJobController
from tests.fakes.controller_deployment import DeploymentController
from tests.fakes.controller_job import JobController
from tests.fakes.controller_replicaset import ReplicaSetController
from tests.fakes.controller_statefulset import StatefulSetController


@dataclass
class ControllerManager:
    """The controller doubles over one store."""

    store: Store
    deployments: DeploymentController = field(init=False)
    replica_sets: ReplicaSetController = field(init=False)
    stateful_sets: StatefulSetController = field(init=False)
    jobs: JobController = field(init=False)
    cron_jobs: CronJobController = field(init=False)

    def __post_init__(self) -> None:
        self.deployments = DeploymentController(self.store)
        self.replica_sets = ReplicaSetController(self.store)
        self.stateful_sets = StatefulSetController(self.store)
        self.jobs = JobController(self.store)
        self.cron_jobs = CronJobController(self.store)

    def reconcile(self, rounds: int = 12) -> bool:
        """Sync everything until nothing changes; False when `rounds` ran out first."""
        syncs = [
            (("apps", "Deployment"), self.deployments.sync),
            (("apps", "ReplicaSet"), self.replica_sets.sync),
            (("", "ReplicationController"), self.replica_sets.sync),
            (("apps", "StatefulSet"), self.stateful_sets.sync),
            (("batch", "Job"), self.jobs.sync),
        ]
        for _ in range(rounds):
            writes = sum(
                sync(obj)
                for (group, kind), sync in syncs
                for obj in self.store.of_kind(group, kind)
            )
            if not writes:
                return True
        return False

    def run_cronjob(self, cronjob: Key, minute: int) -> dict | None:
        """One scheduled run of the CronJob: its Job, or None when refused or suspended."""
        stored = self.store.get(cronjob)
        return None if stored is None else self.cron_jobs.run(stored, minute)

    @property
    def replica_sets_created(self) -> Counter[str]:
        """ReplicaSets the deployment controller created, per Deployment."""
        return self.deployments.created

    @property
    def refused(self) -> list[Result]:
        """Every write a controller was refused."""
        return [
            *self.deployments.refused,
            *self.replica_sets.refused,
            *self.stateful_sets.refused,
            *self.jobs.refused,
            *self.cron_jobs.refused,
        ]
