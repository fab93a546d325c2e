"""Volcano `PodGroup` (scheduling.volcano.sh/v1beta1, namespaced): the gang the scheduler places all-or-nothing.

Counterpart: `staging/src/volcano.sh/apis/pkg/apis/scheduling/v1beta1/types.go` (PodGroup, PodGroupSpec,
SubGroupPolicySpec, PodGroupStatus, PodGroupCondition and the condition type/reason constants).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import Field

from lapilli.api.common import (
    DNS_SUBDOMAIN_PATTERN,
    LabelSelector,
    NetworkTopologySpec,
    NonNegativeInt32,
    PositiveInt32,
    ResourceList,
    Str,
    Timestamp,
    TopLevelModel,
    VolcanoModel,
)
from lapilli.api.constants import DEFAULT_QUEUE, PODGROUP_KIND, SCHEDULING_API_VERSION


class PodGroupPhase(StrEnum):
    """`status.phase` of a PodGroup as the scheduler computes it."""

    PENDING = "Pending"
    RUNNING = "Running"
    UNKNOWN = "Unknown"
    INQUEUE = "Inqueue"
    COMPLETED = "Completed"


class PodGroupConditionType(StrEnum):
    """Values of `status.conditions[].type` the scheduler writes (the field itself is a free string)."""

    UNSCHEDULABLE = "Unschedulable"
    SCHEDULED = "Scheduled"


class PodGroupConditionReason(StrEnum):
    """Values of `status.conditions[].reason` the scheduler writes (the field itself is a free string)."""

    POD_FAILED = "PodFailed"
    POD_DELETED = "PodDeleted"
    NOT_ENOUGH_RESOURCES = "NotEnoughResources"
    NOT_ENOUGH_PODS = "NotEnoughTasks"  # Volcano's constant is NotEnoughPodsReason; the text says tasks
    NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"


POD_GROUP_READY_MESSAGE: Final = "pod group is ready"
POD_GROUP_NOT_READY_MESSAGE: Final = "pod group is not ready"


class PodGroupCondition(VolcanoModel):
    """One condition of a PodGroup; `status` is a core ConditionStatus ("True", "False", "Unknown")."""

    type: Str = ""
    status: Str = ""
    transition_id: Str = Field(default="", alias="transitionID")
    last_transition_time: Timestamp | None = None
    reason: Str = ""
    message: Str = ""


class SubGroupPolicySpec(VolcanoModel):
    """A sub-gang inside the PodGroup: pods selected by `labelSelector`, grouped by `matchLabelKeys`."""

    name: Annotated[str, Field(strict=True, max_length=253)] = ""
    network_topology: NetworkTopologySpec | None = None
    sub_group_size: PositiveInt32 = 1
    min_sub_groups: NonNegativeInt32 = 0
    label_selector: LabelSelector | None = None
    match_label_keys: list[Str] = Field(default_factory=list)


class PodGroupSpec(VolcanoModel):
    """What the gang needs: `minMember` pods (per task `minTaskMember`), `minResources`, in `queue`.

    `queue` defaults to `default` as in the CRD. `minResources` stays None when absent: enqueue then admits the
    group without a resource check.
    """

    min_member: NonNegativeInt32 = 0
    min_task_member: dict[str, NonNegativeInt32] = Field(default_factory=dict)
    queue: Annotated[str, Field(strict=True, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)] = DEFAULT_QUEUE
    priority_class_name: Annotated[str, Field(strict=True, max_length=253)] = ""
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicySpec] = Field(default_factory=list)


class PodGroupStatus(VolcanoModel):
    """Phase, conditions and pod counts of a PodGroup, written by the scheduler and the job controller."""

    phase: PodGroupPhase | None = None
    conditions: list[PodGroupCondition] = Field(default_factory=list)
    running: NonNegativeInt32 = 0
    succeeded: NonNegativeInt32 = 0
    failed: NonNegativeInt32 = 0


class PodGroup(TopLevelModel):
    """A Volcano PodGroup; pods join it through the `scheduling.k8s.io/group-name` annotation."""

    api_version: Literal["scheduling.volcano.sh/v1beta1"] = SCHEDULING_API_VERSION
    kind: Literal["PodGroup"] = PODGROUP_KIND
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)
