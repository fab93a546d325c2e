"""Prometheus metrics of the controllers (exported on the service's /metrics)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

from lapilli.cluster.workqueue import CAUSES, Cause


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry or CollectorRegistry()
        self.actions = Counter(
            "lapilli_controller_job_actions_total", "Job actions executed, by action and result.",
            ["action", "result"], registry=registry,
        )
        self.sync_seconds = Histogram(
            "lapilli_controller_job_action_seconds", "Time to execute one Job action (all its API calls).",
            ["action"], registry=registry, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.pods_created = Counter(
            "lapilli_controller_pods_created_total", "Pods created for Volcano Jobs.", registry=registry,
        )
        self.pods_deleted = Counter(
            "lapilli_controller_pods_deleted_total", "Pods of Volcano Jobs deleted by the controller.",
            registry=registry,
        )
        self.commands = Counter(
            "lapilli_controller_commands_total", "Commands taken (deleted, then executed), by action.",
            ["action"], registry=registry,
        )
        self.podgroups_created = Counter(
            "lapilli_controller_podgroups_created_total", "PodGroups created, by owner (job or pod).",
            ["owner"], registry=registry,
        )
        self.work_retries = Counter(
            "lapilli_controller_work_retries_total", "Work items queued again with back-off after their work failed, "
            "by controller and cause (request: refused by the API server or the connection failed; unexpected: a bug, "
            "logged with its traceback).", ["controller", "cause"], registry=registry,
        )

    def retried(self, controller: str) -> Callable[[Cause], None]:
        """The `run_worker` callback counting `controller`'s retries (its series exist from the start, at 0)."""
        for cause in CAUSES:
            self.work_retries.labels(controller, cause)
        return lambda cause: self.work_retries.labels(controller, cause).inc()
