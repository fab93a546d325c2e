"""Volcano `Queue` (scheduling.volcano.sh/v1beta1, cluster-scoped).

Counterpart: `staging/src/volcano.sh/apis/pkg/apis/scheduling/v1beta1/types.go` (Queue, QueueSpec, QueueStatus,
Guarantee, Reservation, Cluster, Affinity). The queue's state lives only in `status.state`; there is no spec.state.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from lapilli.api.common import (
    DNS_SUBDOMAIN_PATTERN,
    Int32,
    NonNegativeInt32,
    ResourceList,
    Str,
    TopLevelModel,
    VolcanoModel,
)
from lapilli.api.constants import DEFAULT_QUEUE_WEIGHT, QUEUE_KIND, SCHEDULING_API_VERSION


class QueueState(StrEnum):
    """`status.state` of a Queue; only an Open queue accepts new jobs."""

    OPEN = "Open"
    CLOSED = "Closed"
    CLOSING = "Closing"
    UNKNOWN = "Unknown"


QueuePhase = QueueState
"""Alias for readers who think of the queue state as a phase, like the other kinds have."""


class DequeueStrategy(StrEnum):
    """Defined by the API (CRD default `traverse`); no Volcano scheduler code reads it."""

    FIFO = "fifo"
    TRAVERSE = "traverse"


class Guarantee(VolcanoModel):
    """Resources reserved for the queue, subtracted from what other queues can be given."""

    resource: ResourceList = Field(default_factory=dict)


class Reservation(VolcanoModel):
    """Nodes locked for the queue and their idle resources."""

    nodes: list[Str] = Field(default_factory=list)
    resource: ResourceList = Field(default_factory=dict)


class Cluster(VolcanoModel):
    """A cluster the queue's jobs may be forwarded to (multi-cluster)."""

    name: Str = ""
    weight: Int32 = 0
    capacity: ResourceList = Field(default_factory=dict)


class NodeGroupAffinity(VolcanoModel):
    """Node groups (label `volcano.sh/nodegroup-name`) the queue's pods must or should land on."""

    required_during_scheduling_ignored_during_execution: list[Str] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[Str] = Field(default_factory=list)


class NodeGroupAntiAffinity(VolcanoModel):
    """Node groups the queue's pods must or should avoid."""

    required_during_scheduling_ignored_during_execution: list[Str] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[Str] = Field(default_factory=list)


class Affinity(VolcanoModel):
    """Node-group (anti-)affinity of a queue, used by the nodegroup plugin."""

    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAntiAffinity | None = None


class QueueSpec(VolcanoModel):
    """Desired share, limits and placement of a queue.

    `weight` defaults to 1 as in the CRD. The CRD also bounds it to 1..65535, but the model accepts 0: the queue
    mutating webhook rewrites 0 to 1, and mutating webhooks see the object before schema validation does.
    `reclaimable` stays None when absent (the webhook sets true; the scheduler reads None as true).
    """

    weight: Annotated[int, Field(strict=True, ge=0, le=65535)] = DEFAULT_QUEUE_WEIGHT
    capability: ResourceList = Field(default_factory=dict)
    reclaimable: bool | None = None
    extend_clusters: list[Cluster] = Field(default_factory=list)
    guarantee: Guarantee = Field(default_factory=Guarantee)
    affinity: Affinity | None = None
    type: Annotated[str, Field(strict=True, max_length=253)] = ""
    parent: Annotated[str, Field(strict=True, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)] = ""
    deserved: ResourceList = Field(default_factory=dict)
    priority: NonNegativeInt32 = 0
    dequeue_strategy: DequeueStrategy = DequeueStrategy.TRAVERSE


class QueueStatus(VolcanoModel):
    """Observed queue state; `allocated` is the sum of requests of allocated tasks, propagated up to `root`.

    The per-phase PodGroup counters exist in the API but Volcano ≥1.11 no longer persists them.
    """

    state: QueueState | None = None
    unknown: NonNegativeInt32 = 0
    pending: NonNegativeInt32 = 0
    running: NonNegativeInt32 = 0
    inqueue: NonNegativeInt32 = 0
    completed: NonNegativeInt32 = 0
    reservation: Reservation = Field(default_factory=Reservation)
    allocated: ResourceList = Field(default_factory=dict)


class Queue(TopLevelModel):
    """A Volcano queue: a weighted, optionally capped and guaranteed share of the cluster for PodGroups."""

    api_version: Literal["scheduling.volcano.sh/v1beta1"] = SCHEDULING_API_VERSION
    kind: Literal["Queue"] = QUEUE_KIND
    spec: QueueSpec = Field(default_factory=QueueSpec)
    status: QueueStatus = Field(default_factory=QueueStatus)
