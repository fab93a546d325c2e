"""Volcano `Command` (bus.volcano.sh/v1alpha1, namespaced) and the bus enums `Event` and `Action`.

Counterparts: `staging/src/volcano.sh/apis/pkg/apis/bus/v1alpha1/{commands,events,actions}.go`.

A Command asks a controller to act once on its `target` (vcctl: suspend → AbortJob, resume → ResumeJob,
queue operate → OpenQueue/CloseQueue). It has no spec and no status: the fields sit at the top level, and the
controller deletes the Command before acting so it runs at most once.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from lapilli.api.common import OwnerReference, Str, TopLevelModel
from lapilli.api.constants import BUS_API_VERSION, COMMAND_KIND


class Event(StrEnum):
    """What happened to a job, its tasks or pods; lifecycle policies map events to actions.

    Users write `*`, PodFailed, PodEvicted, PodPending, Unknown, TaskCompleted and TaskFailed; PodRunning, OutOfSync
    and CommandIssued are internal; JobUpdated is accepted but never emitted.
    """

    ANY = "*"
    POD_PENDING = "PodPending"
    POD_RUNNING = "PodRunning"
    POD_FAILED = "PodFailed"
    POD_EVICTED = "PodEvicted"
    JOB_UNKNOWN = "Unknown"
    TASK_COMPLETED = "TaskCompleted"
    OUT_OF_SYNC = "OutOfSync"
    COMMAND_ISSUED = "CommandIssued"
    JOB_UPDATED = "JobUpdated"
    TASK_FAILED = "TaskFailed"


class Action(StrEnum):
    """What a controller does in answer to an event or a Command.

    The first eight are user-facing (policies and Commands); the rest are internal to the controllers.
    """

    ABORT_JOB = "AbortJob"
    RESTART_JOB = "RestartJob"
    RESTART_TASK = "RestartTask"
    RESTART_POD = "RestartPod"
    RESTART_PARTITION = "RestartPartition"
    TERMINATE_JOB = "TerminateJob"
    COMPLETE_JOB = "CompleteJob"
    RESUME_JOB = "ResumeJob"
    SYNC_JOB = "SyncJob"
    ENQUEUE_JOB = "EnqueueJob"
    SYNC_QUEUE = "SyncQueue"
    OPEN_QUEUE = "OpenQueue"
    CLOSE_QUEUE = "CloseQueue"


class Command(TopLevelModel):
    """A one-shot request (`action`) against `target`, with an optional reason and message.

    `action` is a free string in Volcano's Go type; here (and in our CRD) it is one of `Action`, since no
    controller can execute anything else.
    """

    api_version: Literal["bus.volcano.sh/v1alpha1"] = BUS_API_VERSION
    kind: Literal["Command"] = COMMAND_KIND
    action: Action | None = None
    target: OwnerReference | None = None
    reason: Str = ""
    message: Str = ""
