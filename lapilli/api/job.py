"""Volcano `Job` (batch.volcano.sh/v1alpha1, namespaced; short names vcjob, vj).

Counterpart: `staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go` (Job, JobSpec, TaskSpec, VolumeSpec,
LifecyclePolicy, DependsOn, PartitionPolicySpec, JobStatus, JobState, TaskState, JobCondition, the phase and
event enums).

Defaults here are the CRD's (`queue: default`, `maxRetry: 3`, `partitionPolicy.minPartitions: 0`), applied by the
API server on create. The job mutating webhook's defaults (schedulerName, task names, minAvailable, task maxRetry,
implied plugins) are admission behaviour and are deliberately not model defaults: the webhook must see which
fields the user left empty.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from lapilli.api.command import Action, Event
from lapilli.api.common import (
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    Duration,
    FreeForm,
    Int32,
    Lenient,
    NetworkTopologySpec,
    NonNegativeInt32,
    PositiveInt32,
    Str,
    Timestamp,
    TopLevelModel,
    VolcanoModel,
    named,
    not_empty,
)
from lapilli.api.constants import BATCH_API_VERSION, DEFAULT_MAX_RETRY, DEFAULT_QUEUE, JOB_KIND


class JobPhase(StrEnum):
    """`status.state.phase` of a Job (there is no Unknown job phase)."""

    PENDING = "Pending"
    ABORTING = "Aborting"
    ABORTED = "Aborted"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    TERMINATING = "Terminating"
    TERMINATED = "Terminated"
    FAILED = "Failed"


class JobEvent(StrEnum):
    """Reasons of the Kubernetes Events the job controller records on a Job."""

    COMMAND_ISSUED = "CommandIssued"
    PLUGIN_ERROR = "PluginError"
    PVC_ERROR = "PVCError"
    POD_GROUP_ERROR = "PodGroupError"
    EXECUTE_ACTION = "ExecuteAction"
    JOB_STATUS_ERROR = "JobStatusError"
    POD_GROUP_PENDING = "PodGroupPending"


class NumaPolicy(StrEnum):
    """`task.topologyPolicy`, copied to pods as annotation `volcano.sh/numa-topology-policy`."""

    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"


class Iteration(StrEnum):
    """Whether a task waits for any or for all of the tasks it depends on."""

    ANY = "any"
    ALL = "all"


class LifecyclePolicy(VolcanoModel):
    """Rule mapping an event (or a container exit code) to an action, optionally after `timeout`.

    `event`/`events` and `exitCode` are mutually exclusive and exitCode 0 is invalid; the admission webhook checks
    that, so its messages match Volcano's. `timeout` is required for PodPending to have any effect.
    """

    action: Annotated[Action, Lenient] | None = None
    event: Annotated[Event, Lenient] | None = None
    events: list[Annotated[Event, Lenient]] = Field(default_factory=list)
    exit_code: Int32 | None = None
    timeout: Duration | None = None

    def all_events(self) -> list[str]:
        """`event` then `events`, duplicates and empty strings dropped, as Volcano merges them."""
        return list(dict.fromkeys(e for e in ([self.event] if self.event else []) + list(self.events) if e))


class VolumeSpec(VolcanoModel):
    """A PVC mounted into every container of the job: an existing claim by name, or a new one from `volumeClaim`."""

    mount_path: Annotated[str, Field(strict=True), named(min_length=1, pattern=r"^[^:]+$")]
    volume_claim_name: Annotated[str, Field(strict=True), named(max_length=253)] = ""
    volume_claim: FreeForm | None = None  # a core PersistentVolumeClaimSpec, kept as given


class DependsOn(VolcanoModel):
    """Tasks that must be running (any or all of them) before this task's pods are created."""

    name: list[Str] = Field(default_factory=list)
    iteration: Annotated[Iteration, Lenient] | None = None


class PartitionPolicySpec(VolcanoModel):
    """Splits a task into `totalPartitions` groups of `partitionSize` pods (replicas must equal their product)."""

    total_partitions: PositiveInt32
    partition_size: PositiveInt32
    network_topology: NetworkTopologySpec | None = None
    min_partitions: NonNegativeInt32 = 0


class TaskSpec(VolcanoModel):
    """One role of the job: `replicas` pods from `template`, with their own policies and retry budget."""

    name: Annotated[str, Field(strict=True), named(max_length=63, pattern=DNS_LABEL_PATTERN)] = ""
    replicas: NonNegativeInt32 = 0
    min_available: NonNegativeInt32 | None = None
    template: FreeForm = Field(default_factory=dict)  # a core PodTemplateSpec; we never validate pod specs
    policies: list[LifecyclePolicy] = Field(default_factory=list)
    topology_policy: Annotated[NumaPolicy, Lenient] | None = None
    max_retry: NonNegativeInt32 = 0
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicySpec | None = None


def _null_arguments_empty(plugins: object) -> object:
    """`ssh:` with nothing after it (YAML null) is a plugin without arguments, as Go decodes a nil slice."""
    if isinstance(plugins, dict):
        return {name: [] if args is None else args for name, args in plugins.items()}
    return plugins


class JobSpec(VolcanoModel):
    """The desired job: its tasks, gang size, queue, policies, plugins and retry budget."""

    scheduler_name: Annotated[str, Field(strict=True), named(max_length=63)] = ""
    min_available: NonNegativeInt32 = 0
    volumes: list[VolumeSpec] = Field(default_factory=list)
    tasks: Annotated[list[TaskSpec], not_empty()] = Field(default_factory=list)
    policies: list[LifecyclePolicy] = Field(default_factory=list)
    plugins: Annotated[dict[str, list[Str]], BeforeValidator(_null_arguments_empty)] = Field(default_factory=dict)
    running_estimate: Duration | None = None
    queue: Annotated[str, Field(strict=True), named(max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)] = DEFAULT_QUEUE
    max_retry: NonNegativeInt32 = DEFAULT_MAX_RETRY
    ttl_seconds_after_finished: NonNegativeInt32 | None = None
    priority_class_name: Annotated[str, Field(strict=True), named(max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)] = ""
    min_success: PositiveInt32 | None = None
    network_topology: NetworkTopologySpec | None = None


class JobState(VolcanoModel):
    """Current phase of the job with the reason and time of the last transition."""

    phase: JobPhase | None = None
    reason: Str = ""
    message: Str = ""
    last_transition_time: Timestamp | None = None


class TaskState(VolcanoModel):
    """Pod counts of one task by pod phase (Pending, Running, Succeeded, Failed, Unknown)."""

    phase: dict[str, Int32] = Field(default_factory=dict)


class JobCondition(VolcanoModel):
    """When the job last entered a phase; the job keeps one condition per phase."""

    status: JobPhase
    last_transition_time: Timestamp | None = None


class JobStatus(VolcanoModel):
    """Observed job state, pod counts, version (bumped on every whole-job kill) and controlled resources."""

    state: JobState = Field(default_factory=JobState)
    min_available: NonNegativeInt32 = 0
    task_status_count: dict[str, TaskState] = Field(default_factory=dict)
    pending: NonNegativeInt32 = 0
    running: NonNegativeInt32 = 0
    succeeded: NonNegativeInt32 = 0
    failed: NonNegativeInt32 = 0
    terminating: NonNegativeInt32 = 0
    unknown: NonNegativeInt32 = 0
    version: NonNegativeInt32 = 0
    retry_count: NonNegativeInt32 = 0
    running_duration: Duration | None = None
    controlled_resources: dict[str, Str] = Field(default_factory=dict)
    conditions: list[JobCondition] = Field(default_factory=list)


class Job(TopLevelModel):
    """A Volcano batch Job: several tasks started together as one gang."""

    api_version: Literal["batch.volcano.sh/v1alpha1"] = BATCH_API_VERSION
    kind: Literal["Job"] = JOB_KIND
    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)
