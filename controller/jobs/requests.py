"""What happened to a Job, as a request for its worker: Volcano's `apis.Request` and the pod-event classifier.

Mirrors `pkg/controllers/job/job_controller_handler.go` (reference §3.1). Every watch event about a Job, one of
its pods, its PodGroup or a Command becomes a `Request`; `applyPolicies` (`policies.py`) then turns a request
into an action. Classification is a pure function of the pod before and after the change, the Job and the
task's current pods, so it is tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from lapilli.api import Action, Event
from lapilli.api.constants import (
    BATCH_API_VERSION,
    CONTROLLER_OUT_OF_SYNC_KEY,
    DEFAULT_MAX_RETRY,
    EVICTED_BY_ANNOTATION,
    JOB_KIND,
    JOB_NAME_KEY,
    JOB_VERSION_KEY,
    PARTITION_ID_KEY,
    TASK_SPEC_KEY,
)
from lapilli.meta import Obj, annotations_of, is_deleting, labels_of, name_of, namespace_of, owner_references, uid_of

INTERNAL_EVENTS: Final = frozenset({Event.OUT_OF_SYNC, Event.COMMAND_ISSUED, Event.POD_RUNNING})


@dataclass(frozen=True, slots=True)
class Request:
    """One thing to look at for the Job `namespace/job_name`. `event` None: "just sync" (PodGroup phase change).

    `job_version` is the version stamped on the pod that caused the request: a request from a pod of an older
    incarnation of the Job (version below `status.version`) never triggers a policy. `delayed` marks a request
    whose policy timeout has already elapsed.
    """

    namespace: str
    job_name: str
    job_uid: str = ""
    task: str = ""
    pod_name: str = ""
    pod_uid: str = ""
    partition: str = ""
    event: Event | None = None
    exit_code: int = 0
    action: Action | None = None
    job_version: int = 0
    delayed: bool = False
    scheduler_evicted: bool = False  # the pod carried `lapilli.io/evicted-by`: the scheduler decided this loss

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.job_name}"

    def with_action(self, action: Action) -> Request:
        return replace(self, action=action, delayed=True)


def _phase(pod: Obj | None) -> str:
    status = (pod or {}).get("status")
    return str(status.get("phase") or "") if isinstance(status, Mapping) else ""


def job_owner(obj: Obj) -> Obj | None:
    """The controller ownerReference of `obj` if it is a Volcano Job."""
    for ref in owner_references(obj):
        if ref.get("controller") and ref.get("kind") == JOB_KIND and (
            ref.get("apiVersion") == BATCH_API_VERSION
        ):
            return ref
    return None


def out_of_sync(pod: Obj | None) -> bool:
    """The controller marked this pod just before deleting it: its events are not policy events."""
    return annotations_of(pod).get(CONTROLLER_OUT_OF_SYNC_KEY) == "true"


def exit_code(pod: Obj) -> int:
    """Exit code of the first container's terminated state (Volcano supports one container per pod here)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    if statuses and isinstance(statuses[0], Mapping):
        terminated = (statuses[0].get("state") or {}).get("terminated")
        if isinstance(terminated, Mapping):
            return int(terminated.get("exitCode") or 0)
    return 0


def restarts(pod: Obj) -> int:
    status = pod.get("status") or {}
    return sum(
        int(c.get("restartCount") or 0)
        for key in ("containerStatuses", "initContainerStatuses")
        for c in status.get(key) or []
        if isinstance(c, Mapping)
    )


def _task_spec(job: Obj | None, task: str) -> Obj | None:
    for spec in ((job or {}).get("spec") or {}).get("tasks") or []:
        if isinstance(spec, Mapping) and spec.get("name") == task:
            return spec
    return None


def task_completed(job: Obj | None, task: str, task_pods: Iterable[Obj]) -> bool:
    """Every replica of the task Succeeded (the cache's `TaskCompleted`)."""
    spec = _task_spec(job, task)
    replicas = int((spec or {}).get("replicas") or 0)
    return replicas > 0 and sum(1 for p in task_pods if _phase(p) == "Succeeded") >= replicas


def task_failed(job: Obj | None, task: str, task_pods: Iterable[Obj]) -> bool:
    """The task's live pods restarted their containers `maxRetry` times in total (0 means 3)."""
    spec = _task_spec(job, task)
    if spec is None:
        return False
    limit = int(spec.get("maxRetry") or 0) or DEFAULT_MAX_RETRY
    total = sum(restarts(p) for p in task_pods if _phase(p) in ("Running", "Pending"))
    return total >= limit


def base_request(pod: Obj) -> Request | None:
    """The request skeleton for a pod of a Volcano Job, or None if the pod is not one."""
    owner = job_owner(pod)
    notes = annotations_of(pod)
    job_name, version, task = notes.get(JOB_NAME_KEY), notes.get(JOB_VERSION_KEY), notes.get(TASK_SPEC_KEY)
    if owner is None or not job_name or task is None or not str(version or "").isdigit():
        return None
    return Request(
        namespace=namespace_of(pod), job_name=str(job_name), job_uid=str(owner.get("uid") or ""),
        task=str(task), pod_name=name_of(pod), pod_uid=uid_of(pod),
        partition=str(labels_of(pod).get(PARTITION_ID_KEY) or ""), job_version=int(str(version)),
    )


def pod_request(
    event_type: str, pod: Obj, old: Obj | None, *, job: Obj | None, task_pods: Iterable[Obj], first_deletion: bool,
) -> Request | None:
    """Classify one pod event (reference §3.1), or None for pods that are not a Volcano Job's.

    `task_pods` are the task's pods as the store has them after this event; `first_deletion` is False when an
    earlier event of this pod UID already reported its deletion (so one eviction is one `PodEvicted`).
    """
    base = base_request(pod)
    if base is None:
        return None
    if event_type == "DELETED" or is_deleting(pod):
        evicted = first_deletion and not out_of_sync(pod) and not (event_type == "DELETED" and old is None)
        return replace(base, event=Event.POD_EVICTED if evicted else Event.OUT_OF_SYNC,
                       scheduler_evicted=evicted and EVICTED_BY_ANNOTATION in annotations_of(pod))
    if event_type == "ADDED" or old is None:
        return replace(base, event=Event.OUT_OF_SYNC if out_of_sync(pod) else Event.POD_PENDING)
    event, code = _update_event(pod, old, job, base.task, list(task_pods))
    if out_of_sync(pod):
        event = Event.OUT_OF_SYNC
    return replace(base, event=event, exit_code=code)


def _update_event(pod: Obj, old: Obj, job: Obj | None, task: str, task_pods: list[Obj]) -> tuple[Event, int]:
    phase, before = _phase(pod), _phase(old)
    if phase == "Failed":
        return (Event.POD_FAILED, exit_code(pod)) if before != "Failed" else (Event.OUT_OF_SYNC, 0)
    if phase == "Succeeded":
        completed = before != "Succeeded" and task_completed(job, task, task_pods)
        return (Event.TASK_COMPLETED if completed else Event.OUT_OF_SYNC), 0
    if phase in ("Running", "Pending"):
        if before != phase:
            return (Event.POD_RUNNING if phase == "Running" else Event.POD_PENDING), 0
        if task_failed(job, task, task_pods):
            return Event.TASK_FAILED, 0
    return Event.OUT_OF_SYNC, 0
