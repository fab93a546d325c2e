"""What one `syncJob` or `killJob` does to a Job's pods, decided without I/O.

Mirrors `syncJob` and `killJob` in `job_controller_actions.go` (reference §3.2 and §3.5):

* sync — every replica `<job>-<task>-<i>` that is missing is created (once the PodGroup is admitted, and for a
  task with `dependsOn` only once the tasks it depends on are ready); pods past `replicas` (scale down) and
  pods the controller marked out-of-sync are deleted; everything else is counted by phase. The work is in
  proportion to the pods that exist: missing replicas are counted, then listed one by one as they are made;
* kill — every pod not in a retained phase is deleted (all of the Job, or one task, pod or partition).

Pods being deleted count as terminating and are never recreated under their still-taken name. Unlike
Volcano, pods are counted even while the PodGroup waits to be admitted, so `status` never goes stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from controller.jobs.podgroup import task_min_member
from controller.jobs.requests import out_of_sync
from controller.jobs.state import Counts
from lapilli.api import Iteration, Job, TaskSpec
from lapilli.api.constants import DEFAULT_TASK_SPEC, PARTITION_ID_KEY, TASK_SPEC_KEY
from lapilli.jobplugins import make_pod_name
from lapilli.meta import Obj, annotations_of, labels_of, name_of

IsDeleting = Callable[[Obj], bool]
PHASES = ("Pending", "Running", "Succeeded", "Failed")


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def pod_task(pod: Obj) -> str:
    return str(annotations_of(pod).get(TASK_SPEC_KEY) or DEFAULT_TASK_SPEC)


class Tally:
    """Accumulates `Counts` (Volcano's `classifyAndAddUpPodBaseOnPhase` + `calcPodStatus`)."""

    def __init__(self) -> None:
        self.by_phase = {"Pending": 0, "Running": 0, "Succeeded": 0, "Failed": 0, "Unknown": 0}
        self.terminating = 0
        self.tasks: dict[str, dict[str, int]] = {}

    def add(self, task: str, phase: str, count: int = 1) -> None:
        phase = phase if phase in PHASES else "Unknown"
        self.by_phase[phase] += count
        per_task = self.tasks.setdefault(task, {})
        per_task[phase] = per_task.get(phase, 0) + count

    def counts(self) -> Counts:
        p = self.by_phase
        return Counts(p["Pending"], p["Running"], p["Succeeded"], p["Failed"], self.terminating, p["Unknown"],
                      self.tasks)


@dataclass(frozen=True, slots=True)
class Missing:
    """Replicas of one task that have no pod: `count` of them, found lazily among `range(task.replicas)`."""

    task: TaskSpec
    count: int
    present: frozenset[int]

    def indices(self) -> Iterator[int]:
        found = 0
        for index in range(self.task.replicas):
            if found == self.count:
                return
            if index not in self.present:
                found += 1
                yield index


@dataclass(slots=True)
class SyncPlan:
    missing: list[Missing] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)

    def creations(self) -> Iterator[tuple[TaskSpec, int]]:
        """The pods to create, one (task, index) at a time: nothing is built per replica ahead of time."""
        for missing in self.missing:
            for index in missing.indices():
                yield missing.task, index


def by_name(pods: Sequence[Obj]) -> dict[str, Obj]:
    return {name_of(p): p for p in pods}


def replica_index(name: str, job_name: str, task: TaskSpec) -> int | None:
    """The replica `name` is (`<job>-<task>-<i>` with `i < replicas`, as `make_pod_name` writes it), else None."""
    prefix = make_pod_name(job_name, task.name, 0)[:-1]
    digits = name[len(prefix):] if name.startswith(prefix) else ""
    if not digits.isdecimal() or not digits.isascii() or (len(digits) > 1 and digits[0] == "0"):
        return None
    index = int(digits)
    return index if index < task.replicas else None


def task_replicas(job_name: str, task: TaskSpec, pods: Mapping[str, Obj]) -> dict[int, Obj]:
    """The pods that are replicas of `task`, by index: proportional to the pods, never to `replicas`."""
    out: dict[int, Obj] = {}
    for name, pod in pods.items():
        index = replica_index(name, job_name, task)
        if index is not None:
            out[index] = pod
    return out


def _ready(pod: Obj) -> bool:
    phase = pod_phase(pod)
    if phase == "Succeeded":
        return True
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return phase == "Running" and all(bool(s.get("ready")) for s in statuses)


def task_ready(job: Job, task_name: str, pods: Mapping[str, Obj]) -> bool:
    """A dependency is ready when enough of its pods run (all containers ready) or succeeded."""
    task = next((t for t in job.spec.tasks if t.name == task_name), None)
    if task is None:
        return True  # nothing to wait for (validation refuses unknown dependencies anyway)
    ready = sum(1 for pod in task_replicas(job.name, task, pods).values() if _ready(pod))
    return ready >= task_min_member(task)


def dependencies_met(job: Job, task: TaskSpec, pods: Mapping[str, Obj]) -> bool:
    deps = task.depends_on
    if deps is None or not deps.name:
        return True
    if len(deps.name) > 1 and deps.iteration == Iteration.ANY:
        return any(task_ready(job, d, pods) for d in deps.name)
    return all(task_ready(job, d, pods) for d in deps.name)


def plan_sync(job: Job, pods: Sequence[Obj], *, deleting: IsDeleting, admitted: bool) -> SyncPlan:
    """Pods to create and delete, and the counts after doing so. `admitted`: the PodGroup is past Pending.

    Work is proportional to the Job's pods and tasks: missing replicas are counted, and listed only lazily
    (`SyncPlan.creations`), so a Job declaring millions of replicas costs nothing until pods are made.
    """
    plan, tally, named = SyncPlan(), Tally(), by_name(pods)
    for task in job.spec.tasks:
        present = task_replicas(job.name, task, named)
        for pod in present.values():
            if deleting(pod):
                tally.terminating += 1
            elif out_of_sync(pod) and admitted:
                plan.delete.append(pod)
                tally.terminating += 1
            else:
                tally.add(pod_task(pod), pod_phase(pod))
        absent = max(task.replicas, 0) - len(present)
        if absent > 0 and admitted and dependencies_met(job, task, named):
            plan.missing.append(Missing(task, absent, frozenset(present)))
            tally.add(task.name, "Pending", absent)
        replicas = {id(p) for p in present.values()}
        for pod in named.values():  # pods of tasks no longer in the spec are left alone, as in Volcano
            if pod_task(pod) == task.name and id(pod) not in replicas:
                if deleting(pod):
                    tally.terminating += 1
                elif admitted:
                    plan.delete.append(pod)  # scaled down
                    tally.terminating += 1
    plan.counts = tally.counts()
    return plan


@dataclass(frozen=True, slots=True)
class Target:
    """What a RestartTask / RestartPod / RestartPartition kills; None for the whole Job."""

    task: str = ""
    pod: str = ""
    partition: str = ""

    def hits(self, pod: Obj) -> bool:
        if self.pod:
            return name_of(pod) == self.pod
        if pod_task(pod) != self.task:
            return False
        return not self.partition or labels_of(pod).get(PARTITION_ID_KEY) == self.partition


def plan_kill(
    pods: Sequence[Obj], *, retain: frozenset[str], deleting: IsDeleting, target: Target | None = None,
) -> tuple[list[Obj], Counts]:
    """`killJob`/`killTarget`: the pods to delete and the counts once they are going."""
    doomed: list[Obj] = []
    tally = Tally()
    for pod in pods:
        if deleting(pod):
            tally.terminating += 1
            continue
        if (target is None or target.hits(pod)) and pod_phase(pod) not in retain:
            doomed.append(pod)
            tally.terminating += 1
            continue
        tally.add(pod_task(pod), pod_phase(pod))
    return doomed, tally.counts()
