"""What admission rules may consult besides the request: the webhook's settings and the read-only listers."""

from __future__ import annotations

from dataclasses import dataclass, field

from lapilli.api.constants import DEFAULT_QUEUE, DEFAULT_SCHEDULER_NAME, ROOT_QUEUE
from webhook.listers import JobLister, MemoryJobs, MemoryNamespaces, MemoryQueues, NamespaceLister, QueueLister

__all__ = ["DEFAULT_QUEUE", "ROOT_QUEUE", "AdmissionContext", "AdmissionSettings"]


@dataclass(frozen=True, slots=True)
class AdmissionSettings:
    """Volcano webhook-manager flags that change admission (`cmd/webhook-manager/app/options`)."""

    scheduler_names: tuple[str, ...] = (DEFAULT_SCHEDULER_NAME,)
    """`--scheduler-name`: the first is the Job default; pods of any of them are validated."""
    max_queue_depth: int = 5
    """`--max-queue-depth`: a queue plus its non-root ancestors."""
    root_queue_protection: bool = True
    """`--enable-root-queue-protection`: the root queue's capability/deserved/guarantee are frozen."""
    queue_allocated_pods_check: bool = False
    """`--enable-queue-allocated-pods-check`: refuse deleting a queue whose `status.allocated.pods` > 0."""
    max_job_replicas: int = 10_000
    """`--max-job-replicas` (Lapilli's): most pods one Job may declare (all tasks' replicas), so one object
    cannot make the controllers, the scheduler and the API server do unbounded work."""
    max_job_tasks: int = 256
    """`--max-job-tasks` (Lapilli's): most tasks in one Job."""


@dataclass(frozen=True, slots=True)
class AdmissionContext:
    settings: AdmissionSettings = field(default_factory=AdmissionSettings)
    queues: QueueLister = field(default_factory=MemoryQueues)
    jobs: JobLister = field(default_factory=MemoryJobs)
    namespaces: NamespaceLister = field(default_factory=MemoryNamespaces)
