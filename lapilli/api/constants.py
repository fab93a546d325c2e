"""Every Volcano API name Lapilli writes or reads: groups, versions, kinds, plurals, default queues, and all
annotation and label keys.

Counterparts: `register.go` and `labels.go` of `volcano.sh/apis/pkg/apis/{batch,bus,scheduling,topology}`, the
constants in `scheduling/v1beta1/types.go`, and the key constants scattered over `pkg/controllers` and
`pkg/scheduler` (reference §1.6 lists them with who sets each one). Keep one name per key here so a typo cannot
split a key in two.
"""

from typing import Final

# --- API groups, versions, kinds, resources -------------------------------------------------------------------

SCHEDULING_GROUP: Final = "scheduling.volcano.sh"
SCHEDULING_VERSION: Final = "v1beta1"
SCHEDULING_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"  # group/version, a literal for the models' type

BATCH_GROUP: Final = "batch.volcano.sh"
BATCH_VERSION: Final = "v1alpha1"
BATCH_API_VERSION: Final = "batch.volcano.sh/v1alpha1"

BUS_GROUP: Final = "bus.volcano.sh"
BUS_VERSION: Final = "v1alpha1"
BUS_API_VERSION: Final = "bus.volcano.sh/v1alpha1"

QUEUE_KIND: Final = "Queue"
QUEUE_PLURAL: Final = "queues"
QUEUE_SINGULAR: Final = "queue"
QUEUE_SHORT_NAMES: Final = ("q", "queue-v1beta1")

PODGROUP_KIND: Final = "PodGroup"
PODGROUP_PLURAL: Final = "podgroups"
PODGROUP_SINGULAR: Final = "podgroup"
PODGROUP_SHORT_NAMES: Final = ("pg", "podgroup-v1beta1")

JOB_KIND: Final = "Job"
JOB_PLURAL: Final = "jobs"
JOB_SINGULAR: Final = "job"
JOB_SHORT_NAMES: Final = ("vcjob", "vj")

COMMAND_KIND: Final = "Command"
COMMAND_PLURAL: Final = "commands"
COMMAND_SINGULAR: Final = "command"

TOPOLOGY_GROUP: Final = "topology.volcano.sh"
TOPOLOGY_VERSION: Final = "v1alpha1"
TOPOLOGY_API_VERSION: Final = "topology.volcano.sh/v1alpha1"

HYPERNODE_KIND: Final = "HyperNode"
HYPERNODE_PLURAL: Final = "hypernodes"
HYPERNODE_SINGULAR: Final = "hypernode"
HYPERNODE_SHORT_NAMES: Final = ("hn",)

# --- Well-known names and defaults -----------------------------------------------------------------------------

DEFAULT_QUEUE: Final = "default"
"""Queue of a Job or PodGroup that names none (CRD default); created by the scheduler if missing."""
ROOT_QUEUE: Final = "root"
"""Top of the queue hierarchy; parent of every queue without `spec.parent`; jobs cannot be submitted to it."""
DEFAULT_SCHEDULER_NAME: Final = "volcano"
"""`spec.schedulerName` the job mutating webhook fills in (first `--scheduler-name`, default `volcano`)."""
DEFAULT_TASK_SPEC: Final = "default"
"""Task name assumed for a pod that carries no `volcano.sh/task-spec` key."""
DEFAULT_QUEUE_WEIGHT: Final = 1
DEFAULT_MAX_RETRY: Final = 3

# --- PodGroup membership (scheduling.k8s.io / scheduling.volcano.sh) -------------------------------------------

GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
"""Pod annotation: PodGroup the pod belongs to; the scheduler's job id is `<namespace>/<value>`."""
VOLCANO_GROUP_NAME_ANNOTATION: Final = "scheduling.volcano.sh/group-name"
"""Alternative group key (only read by vGPU device code in Volcano)."""
GROUP_MIN_MEMBER_ANNOTATION: Final = "scheduling.volcano.sh/group-min-member"
"""Owner (Deployment, ReplicaSet, StatefulSet, batch Job, DaemonSet) annotation: minMember of its auto PodGroup."""
GROUP_MIN_RESOURCES_ANNOTATION: Final = "scheduling.volcano.sh/group-min-resources"
"""Defined by Volcano for PodGroup minResources."""
QUEUE_NAME_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
"""Pod (or Namespace) annotation: queue of an auto-created PodGroup. Not the same key as `JOB_QUEUE_KEY`."""
QUEUE_ALLOCATION_GATE_KEY: Final = "scheduling.volcano.sh/queue-allocation-gate"
"""Pod annotation "true" plus a scheduling gate of the same name, removed once the queue admits the pod."""

# --- Keys the job controller stamps on pods (label and/or annotation) ------------------------------------------

JOB_NAME_KEY: Final = "volcano.sh/job-name"
JOB_NAMESPACE_KEY: Final = "volcano.sh/job-namespace"
TASK_SPEC_KEY: Final = "volcano.sh/task-spec"
TASK_INDEX_KEY: Final = "volcano.sh/task-index"
JOB_QUEUE_KEY: Final = "volcano.sh/queue-name"
"""The job's queue on its pods (Volcano's `QueueNameKey`)."""
JOB_VERSION_KEY: Final = "volcano.sh/job-version"
JOB_RETRY_COUNT_KEY: Final = "volcano.sh/job-retry-count"
TEMPLATE_UID_KEY: Final = "volcano.sh/template-uid"
PARTITION_ID_KEY: Final = "volcano.sh/partition-id"
JOB_TYPE_KEY: Final = "volcano.sh/job-type"
CONTROLLER_OUT_OF_SYNC_KEY: Final = "volcano.sh/controller-out-of-sync"
"""Set "true" on a pod just before the controller deletes it, so its events are OutOfSync rather than policy."""
NUMA_POLICY_KEY: Final = "volcano.sh/numa-topology-policy"
"""Pod annotation copied from `task.topologyPolicy`."""

# --- Multi-cluster and cronjob bookkeeping ---------------------------------------------------------------------

JOB_FORWARDING_KEY: Final = "volcano.sh/job-forwarding"
FORWARD_CLUSTER_KEY: Final = "volcano.sh/forward-cluster"
BURST_NAME_KEY: Final = "volcano.sh/burst-name"
SILO_RESOURCE_KEY: Final = "volcano.sh/silo-resource"
CRONJOB_SCHEDULED_TIMESTAMP_KEY: Final = "volcano.sh/cronjob-scheduled-timestamp"

# --- Scheduling hints set by users on Jobs, pods or PodGroups --------------------------------------------------

PREEMPTABLE_KEY: Final = "volcano.sh/preemptable"
"""Pod may be a preemption/reclaim victim; true for pods when absent, false for jobs when absent."""
COOLDOWN_TIME_KEY: Final = "volcano.sh/cooldown-time"
"""Minimum run time (Go duration) before a pod may be evicted."""
REVOCABLE_ZONE_KEY: Final = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE_KEY: Final = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE_KEY: Final = "volcano.sh/jdb-max-unavailable"
TOPOLOGY_DECISION_ANNOTATION: Final = "volcano.sh/topology-decision"
QOS_LEVEL_KEY: Final = "volcano.sh/qos-level"
SLA_WAITING_TIME_KEY: Final = "volcano.sh/sla-waiting-time"
SLA_WAITING_TIME_PLAIN_KEY: Final = "sla-waiting-time"
"""Older spelling of `SLA_WAITING_TIME_KEY`, still read by the sla plugin."""
TASK_PRIORITY_ANNOTATION: Final = "volcano.sh/task-priority"
RESOURCE_GROUP_ANNOTATION: Final = "volcano.sh/resource-group"
TASK_TOPOLOGY_ANNOTATION: Final = "volcano.sh/task-topology"
TASK_TOPOLOGY_AFFINITY_ANNOTATION: Final = "volcano.sh/task-topology-affinity"
TASK_TOPOLOGY_ANTI_AFFINITY_ANNOTATION: Final = "volcano.sh/task-topology-anti-affinity"
TASK_TOPOLOGY_TASK_ORDER_ANNOTATION: Final = "volcano.sh/task-topology-task-order"

# --- Network topology (topology.volcano.sh) -------------------------------------------------------------------

NETWORK_TOPOLOGY_MODE_ANNOTATION: Final = "volcano.sh/network-topology-mode"
"""Pod annotation (`hard`/`soft`): networkTopology mode of the PodGroup the PodGroup controller makes for it."""
NETWORK_TOPOLOGY_HIGHEST_TIER_ANNOTATION: Final = "volcano.sh/network-topology-highest-tier"
"""Pod annotation (an integer): `highestTierAllowed` of the PodGroup the PodGroup controller makes for it."""
NETWORK_TOPOLOGY_SOURCE_LABEL: Final = "volcano.sh/network-topology-source"
"""HyperNode label: the discovery source that made it (`label`); discovery touches only HyperNodes it labelled."""

# --- Lapilli's own marks --------------------------------------------------------------------------------------

EVICTED_BY_ANNOTATION: Final = "lapilli.io/evicted-by"
"""Set by the scheduler on a pod just before it evicts it: the action and why (the gang the room is for). The Job
controller acts on such a loss at once, never waiting for the gang to heal (the scheduler decided it)."""

# --- Queues and nodes ------------------------------------------------------------------------------------------

HIERARCHY_ANNOTATION: Final = "volcano.sh/hierarchy"
"""Queue annotation for hierarchical DRF, e.g. `root/eng/prod`."""
HIERARCHY_WEIGHTS_ANNOTATION: Final = "volcano.sh/hierarchy-weights"
"""Queue annotation for hierarchical DRF, e.g. `1/2/8`."""
NODEGROUP_NAME_LABEL: Final = "volcano.sh/nodegroup-name"
NODEGROUP_RESOURCE_LIMITS_ANNOTATION: Final = "volcano.sh/nodegroup-resource-limits"

# --- Job plugins and installers --------------------------------------------------------------------------------

HCCL_RANK_INDEX_ANNOTATION: Final = "hccl/rankIndex"
HELM_RESOURCE_POLICY_ANNOTATION: Final = "helm.sh/resource-policy"
HELM_RESOURCE_POLICY_KEEP: Final = "keep"
