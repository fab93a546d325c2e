"""What admission rules may consult besides the request: the webhook's settings and the read-only listers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lapilli.api.constants import DEFAULT_QUEUE, DEFAULT_SCHEDULER_NAME, ROOT_QUEUE
from lapilli.settings import flag
from webhook.listers import (
    HyperNodeLister,
    JobLister,
    MemoryHyperNodes,
    MemoryJobs,
    MemoryNamespaces,
    MemoryQueues,
    NamespaceLister,
    QueueLister,
)
from webhook.names import dns1123_subdomain
from webhook.resourcegroups import AdmissionConf, parse_admission_conf

__all__ = ["DEFAULT_QUEUE", "ROOT_QUEUE", "AdmissionContext", "AdmissionSettings"]


@dataclass(frozen=True, slots=True)
class AdmissionSettings:
    """Volcano webhook-manager flags that change admission (`cmd/webhook-manager/app/options`)."""

    scheduler_names: tuple[str, ...] = flag("--scheduler-name", (DEFAULT_SCHEDULER_NAME,))
    """Scheduler name(s) of Volcano pods (repeatable): the first is the Job default; pods of any of them are
    validated, and plain pods of any of them get a PodGroup."""
    max_queue_depth: int = flag("--max-queue-depth", 5)
    """Deepest queue hierarchy allowed: a queue plus its non-root ancestors."""
    root_queue_protection: bool = flag("--enable-root-queue-protection/--disable-root-queue-protection", True)
    """Refuse changes to the root queue's capability, deserved and guarantee."""
    queue_allocated_pods_check: bool = flag("--enable-queue-allocated-pods-check", False)
    """Refuse deleting a queue that still has allocated pods (`status.allocated.pods` > 0)."""
    max_job_replicas: int = flag("--max-job-replicas", 10_000)
    """Most pods one Volcano Job may declare (all its tasks' replicas); bigger Jobs are refused at admission, so
    one object cannot make the controllers, the scheduler and the API server do unbounded work (Lapilli's)."""
    max_job_tasks: int = flag("--max-job-tasks", 256)
    """Most tasks one Volcano Job may have (Lapilli's)."""
    admission_conf: Path | None = flag("--admission-conf", None)
    """Volcano's admission configuration file (`resourceGroups`): pods of a group get its nodeSelector, affinity,
    tolerations and schedulerName at creation. Re-read when it changes. The pods webhook must then see every
    pod (README: Resource groups)."""

    def problems(self) -> list[str]:
        """Every reason these settings cannot work (empty when they can)."""
        out: list[str] = []
        if not self.scheduler_names:
            out.append("--scheduler-name must be given at least once")
        out += [f"--scheduler-name {n!r} is not a valid name" for n in self.scheduler_names if dns1123_subdomain(n)]
        if self.max_queue_depth < 1:
            out.append(f"--max-queue-depth {self.max_queue_depth} must be >= 1")
        if self.max_job_replicas < 1:
            out.append(f"--max-job-replicas {self.max_job_replicas} must be >= 1")
        if self.max_job_tasks < 1:
            out.append(f"--max-job-tasks {self.max_job_tasks} must be >= 1")
        if self.admission_conf is not None:
            try:
                parse_admission_conf(self.admission_conf.read_text())
            except (OSError, ValueError) as exc:
                out.append(f"--admission-conf {self.admission_conf}: {getattr(exc, 'strerror', None) or exc}")
        return out


@dataclass(frozen=True, slots=True)
class AdmissionContext:
    settings: AdmissionSettings = field(default_factory=AdmissionSettings)
    queues: QueueLister = field(default_factory=MemoryQueues)
    jobs: JobLister = field(default_factory=MemoryJobs)
    namespaces: NamespaceLister = field(default_factory=MemoryNamespaces)
    hypernodes: HyperNodeLister = field(default_factory=MemoryHyperNodes)
    resource_groups: Callable[[], AdmissionConf] = AdmissionConf  # `--admission-conf`'s groups as they are now
