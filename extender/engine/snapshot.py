"""A snapshot of the cluster as plain records, built once from Kubernetes objects.

Input is what the API server holds: `v1 Node`, `v1 Pod`, `v1 Namespace` (its labels, for the namespace selectors of
pod affinity terms), `scheduling.volcano.sh/v1beta1 PodGroup` and `Queue`, `scheduling.k8s.io/v1 PriorityClass`,
`topology.volcano.sh/v1alpha1 HyperNode`, and the vGPU device config's `v1 ConfigMap` (other ConfigMaps are passed
over). A node's vGPU register annotation that cannot be read is kept as a problem beside the node (its cards are
ignored), never a reason to refuse the node. Quantities and pod terms are parsed here, once (quantities into
Volcano's units); the session turns the records into vectors. Bad input raises `SnapshotError` whose text names the
document, the field and the problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from extender.engine.model import HARD, SOFT, Condition, TaskStatus, TopologySpec, replica_index
from lapilli.api.constants import (
    GROUP_NAME_ANNOTATION,
    HYPERNODE_KIND,
    PREEMPTABLE_KEY,
    TASK_PRIORITY_ANNOTATION,
    TASK_SPEC_KEY,
    TOPOLOGY_API_VERSION,
)
from lapilli.devices.config import DeviceConfig, config_from_configmap
from lapilli.devices.facts import NO_CARDS, NodeCardFacts, PodDeviceFacts, node_card_facts, pod_device_facts
from lapilli.devices.names import CONFIG_KEY
from lapilli.idlegpu import reclaimable_by_condition
from lapilli.meta import Obj, describe, labels_of, name_of, namespace_of, section, uid_of
from lapilli.nodematch import LabelSelector, PodPlacement, Taint, taints_of
from lapilli.podterms import PodTerms
from lapilli.resources.units import GPU, Units, pod_request, resource_list_units
from lapilli.times import parse_rfc3339
from lapilli.topology import HyperNodeRecord, read_hypernode
from lapilli.usage import UsageRecord, record_of


class SnapshotError(ValueError):
    """A document that cannot be part of a snapshot."""


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    allocatable: Units
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool
    cards: NodeCardFacts = NO_CARDS  # vGPU cards the device plugin registered (volcano.sh/node-vgpu-register)


@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    namespace: str
    name: str
    group: str
    role: str
    request: Units
    spec_priority: int | None
    priority_class: str
    task_priority: int | None
    node_name: str | None
    phase: str
    deleting: bool
    creation: float
    preemptable: bool
    nominated_node: str | None
    preemption_never: bool
    placement: PodPlacement
    predicate_key: str
    host_ports: tuple[tuple[str, str, int], ...]
    devices: PodDeviceFacts | None = None  # extended-resource asks, device annotations, card assignment
    labels: Mapping[str, str] = field(default_factory=dict)
    terms: PodTerms | None = None  # inter-pod (anti-)affinity and topology spread, None for most pods
    # Derived from the fields above when the record is made (and again by `dataclasses.replace`): every session
    # turns each pod into a task, and a record outlives many sessions in the service's snapshot.
    status: TaskStatus = field(init=False, compare=False, repr=False)  # the task's status at session open
    index: int | None = field(init=False, compare=False, repr=False)  # `replica_index` of the name
    request_key: tuple[tuple[str, float], ...] = field(init=False, compare=False, repr=False)  # `request`'s items
    key: str = field(init=False, compare=False, repr=False)  # "<namespace>/<name>"
    group_key: str = field(init=False, compare=False, repr=False)  # its PodGroup's key, "" without a group

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", _task_status(self))
        object.__setattr__(self, "index", replica_index(self.name))
        object.__setattr__(self, "request_key", _shared_request_key(tuple(self.request.items())))
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "group_key", f"{self.namespace}/{self.group}" if self.group else "")


# Equal request keys as one tuple, so a session's per-template lookups (`Session._vector`) can go by identity instead
# of hashing every pod's key: records are made once per pod change, sessions read them many times. Bounded: a
# cleared table only makes later records new tuples again (equal by value, which is all a lookup needs).
_REQUEST_KEYS: dict[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]] = {}
_REQUEST_KEYS_MAX: Final = 4096


def _shared_request_key(key: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    shared = _REQUEST_KEYS.get(key)
    if shared is None:
        if len(_REQUEST_KEYS) >= _REQUEST_KEYS_MAX:
            _REQUEST_KEYS.clear()
        shared = _REQUEST_KEYS[key] = key
    return shared


def _task_status(pod: PodRecord) -> TaskStatus:
    if pod.phase in ("Pending", "Running") and pod.deleting:
        return TaskStatus.RELEASING
    if pod.phase == "Running":
        return TaskStatus.RUNNING
    if pod.phase == "Pending":
        return TaskStatus.BOUND if pod.node_name else TaskStatus.PENDING
    if pod.phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if pod.phase == "Failed":
        return TaskStatus.FAILED
    return TaskStatus.UNKNOWN


@dataclass(frozen=True, slots=True)
class SubGroupPolicy:
    """One PodGroup `subGroupPolicy[]` entry (Volcano's `SubGroupPolicySpec`)."""

    name: str
    size: int  # subGroupSize: the sub-gang's minimum
    min_groups: int  # minSubGroups: how many of its sub-gangs the job needs
    selector: LabelSelector | None
    match_keys: tuple[str, ...]
    topology: TopologySpec | None
    # Why `labelSelector` cannot be read ("" when it can): such a policy selects no pod, as in Volcano, whose
    # `LabelSelectorAsSelector` fails the same way, and the job keeps its other pods in its default sub-gang.
    broken: str = ""


@dataclass(frozen=True, slots=True)
class PodGroupRecord:
    namespace: str
    name: str
    queue: str
    min_member: int
    min_task_member: Mapping[str, int]
    min_resources: Units | None
    priority_class: str
    phase: str
    conditions: tuple[Condition, ...]
    creation: float
    annotations: Mapping[str, str]
    preemptable: bool
    network_topology: TopologySpec | None = None
    sub_groups: tuple[SubGroupPolicy, ...] = ()
    # Volcano's IsJobPreemptableForGangEviction: a PodGroup without `volcano.sh/preemptable` may lose its pods to
    # gangpreempt/gangreclaim; one that sets it follows it.
    gang_evictable: bool = True
    # "<namespace>/<name>", made once with the record (as `PodRecord.key`): every session reads it several times.
    key: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")


@dataclass(frozen=True, slots=True)
class QueueRecord:
    name: str
    uid: str
    weight: int
    capability: Units
    guarantee: Units
    deserved: Units | None
    reclaimable: bool
    state: str
    parent: str
    priority: int
    creation: float
    annotations: Mapping[str, str]
    # The decayed usage the scheduler's leader last persisted (`lapilli.usage`); a record that cannot be read is
    # None with the reason in `usage_error` (the queue then counts as having used nothing, never refused).
    usage: UsageRecord | None = None
    usage_error: str = ""


@dataclass(slots=True)
class Snapshot:
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    pods: dict[str, PodRecord] = field(default_factory=dict)
    podgroups: dict[str, PodGroupRecord] = field(default_factory=dict)
    queues: dict[str, QueueRecord] = field(default_factory=dict)
    priority_classes: dict[str, int] = field(default_factory=dict)
    default_priority: int | None = None
    hypernodes: dict[str, HyperNodeRecord] = field(default_factory=dict)
    # Where gang preemption or reclaim made room, for the allocate that follows: PodGroup -> sub-gang -> HyperNode
    # (Volcano keeps `SubJobInfo.NominatedHyperNode` in its cache; the service carries it between sessions).
    nominations: dict[str, dict[str, str]] = field(default_factory=dict)
    # vGPU device configs by "namespace/name" of their ConfigMap (those holding `device-config.yaml`)
    device_configs: dict[str, DeviceConfig] = field(default_factory=dict)
    namespaces: dict[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels
    # Pods ("ns/name") whose GPUs sat idle past the grace period in a queue whose policy reclaims them: preempt and
    # reclaim may evict them for a job that waits, whatever the victim votes say (`lapilli.idlegpu`). The service's
    # idle-GPU monitor hands its set in; a snapshot read from files or by `lapilli job why` takes it from the
    # PodGroups' lapilli.io/IdleGPU condition (`idle_reclaimable_pods`).
    idle_reclaimable: frozenset[str] = frozenset()


def timestamp(value: object) -> float:
    if not value:
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return parse_rfc3339(str(value))
    except ValueError as exc:
        raise ValueError(f"not an RFC 3339 time: {value!r}") from exc


def _parse_bool(value: object) -> bool | None:
    text = str(value).strip().lower()
    if text in ("true", "1", "t", "yes"):
        return True
    if text in ("false", "0", "f", "no"):
        return False
    return None


def _preemptable(meta: Obj, default: bool) -> bool:
    # Volcano reads the annotation first, then the label; a value that is not a bool means "no".
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        if PREEMPTABLE_KEY in source:
            return bool(_parse_bool(source[PREEMPTABLE_KEY]))
    return default


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{what}: expected an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise ValueError(f"{what}: expected an integer, got {value!r}") from exc


def _node(doc: Obj) -> NodeRecord:
    meta, spec, status = section(doc, "metadata"), section(doc, "spec"), section(doc, "status")
    conditions = status.get("conditions") or []
    ready_conditions = [c for c in conditions if c.get("type") == "Ready"]
    # A node without any Ready condition is taken as ready (hand-written snapshots); an explicit False or Unknown
    # keeps it out of the session, as Volcano only schedules onto Ready nodes.
    ready = all(c.get("status") == "True" for c in ready_conditions)
    try:
        allocatable = resource_list_units(status.get("allocatable") or status.get("capacity"))
    except ValueError as exc:
        raise ValueError(f"status.allocatable.{exc}") from exc
    return NodeRecord(
        name=name_of(doc),
        allocatable=allocatable,
        labels=dict(meta.get("labels") or {}),
        taints=taints_of(spec),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        cards=node_card_facts(meta.get("annotations") or {}),
    )


def _predicate_key(spec: Obj) -> str:
    affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    parts = [spec.get("nodeSelector") or {}, affinity or {}, spec.get("tolerations") or []]
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


_PLACEMENTS: dict[str, PodPlacement] = {}


def _placement(key: str, spec: Obj) -> PodPlacement:
    """The pod's placement, shared by every pod with the same predicate key (the key is made of exactly what
    PodPlacement reads): a job's replicas, and every event of one pod, parse it once."""
    placement = _PLACEMENTS.get(key)
    if placement is None:
        if len(_PLACEMENTS) >= 4096:
            _PLACEMENTS.clear()
        placement = _PLACEMENTS[key] = PodPlacement.of(spec)
    return placement


def _labels(doc: Obj) -> dict[str, str]:
    return {str(k): str(v) for k, v in labels_of(doc).items()}


def _host_ports(spec: Obj) -> tuple[tuple[str, str, int], ...]:
    ports: list[tuple[str, str, int]] = []
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                ports.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", int(port["hostPort"])))
    return tuple(ports)


def _pod(doc: Obj) -> PodRecord:
    meta, spec, status = section(doc, "metadata"), section(doc, "spec"), section(doc, "status")
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    try:
        request = pod_request(spec)
    except ValueError as exc:
        raise ValueError(f"spec.containers[].resources: {exc}") from exc
    task_priority = annotations.get(TASK_PRIORITY_ANNOTATION)
    namespace = meta.get("namespace") or "default"
    key = _predicate_key(spec)
    pod_labels = _labels(doc)
    return PodRecord(
        uid=uid_of(doc) or f"{namespace}/{name_of(doc)}",
        namespace=namespace,
        name=name_of(doc),
        group=str(annotations.get(GROUP_NAME_ANNOTATION) or ""),
        role=str(annotations.get(TASK_SPEC_KEY) or labels.get(TASK_SPEC_KEY) or ""),
        request=request,
        spec_priority=_int(spec["priority"], "spec.priority") if spec.get("priority") is not None else None,
        priority_class=str(spec.get("priorityClassName") or ""),
        task_priority=_int(task_priority, f"annotations.{TASK_PRIORITY_ANNOTATION}") if task_priority else None,
        node_name=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        creation=timestamp(meta.get("creationTimestamp")),
        preemptable=_preemptable(meta, default=True),
        nominated_node=status.get("nominatedNodeName") or None,
        preemption_never=spec.get("preemptionPolicy") == "Never",
        placement=_placement(key, spec),
        predicate_key=key,
        host_ports=_host_ports(spec),
        devices=pod_device_facts(spec, annotations, labels),
        labels=pod_labels,
        terms=PodTerms.of(spec, namespace, pod_labels),
    )


def scheduler_resources(quota: Obj) -> dict[str, object]:
    """The names the scheduler reads from a quota-style ResourceList (Volcano's controller fills PodGroup
    `minResources` with ResourceQuota usage keys): `requests.X` counts as `X` unless `X` is given, `limits.*`
    and `count/*` are not resources a node has."""
    out = {k: v for k, v in quota.items() if not k.startswith(("requests.", "limits.", "count/"))}
    for key, value in quota.items():
        if key.startswith("requests."):
            out.setdefault(key.removeprefix("requests."), value)
    return out


def _podgroup(doc: Obj) -> PodGroupRecord:
    meta, spec, status = section(doc, "metadata"), section(doc, "spec"), section(doc, "status")
    min_resources = spec.get("minResources")
    try:
        min_units = resource_list_units(scheduler_resources(min_resources)) if min_resources is not None else None
    except ValueError as exc:
        raise ValueError(f"spec.minResources.{exc}") from exc
    min_task_member = {str(k): _int(v, f"spec.minTaskMember.{k}") for k, v in (spec.get("minTaskMember") or {}).items()}
    topology = spec.get("networkTopology")
    return PodGroupRecord(
        namespace=meta.get("namespace") or "default",
        name=name_of(doc),
        queue=str(spec.get("queue") or "default"),
        min_member=_int(spec.get("minMember", 0), "spec.minMember"),
        min_task_member=min_task_member,
        min_resources=min_units,
        priority_class=str(spec.get("priorityClassName") or ""),
        phase=str(status.get("phase") or "Pending"),
        conditions=tuple(Condition.read(c) for c in status.get("conditions") or ()),
        creation=timestamp(meta.get("creationTimestamp")),
        annotations=dict(meta.get("annotations") or {}),
        preemptable=_preemptable(meta, default=False),
        gang_evictable=_preemptable(meta, default=True),
        network_topology=_topology(topology, "spec.networkTopology") if topology is not None else None,
        sub_groups=tuple(
            _sub_group(p, f"spec.subGroupPolicy[{i}]") for i, p in enumerate(spec.get("subGroupPolicy") or [])),
    )


def _topology(raw: object, where: str) -> TopologySpec:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object")
    mode = str(raw.get("mode") or HARD)
    if mode not in (HARD, SOFT):
        raise ValueError(f"{where}.mode: must be hard or soft, got {mode!r}")
    tier = raw.get("highestTierAllowed")
    value = _int(tier, f"{where}.highestTierAllowed") if tier is not None else None
    if value is not None and value < 0:
        raise ValueError(f"{where}.highestTierAllowed: must be ≥ 0, got {value}")
    return TopologySpec(mode, value, str(raw.get("highestTierName") or ""))


def _sub_group(raw: object, where: str) -> SubGroupPolicy:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object")
    selector, broken = None, ""
    try:
        selector = LabelSelector.of(raw["labelSelector"]) if raw.get("labelSelector") is not None else None
    except ValueError as exc:
        broken = f"{where}.labelSelector.{exc}"
    topology = raw.get("networkTopology")
    size = _int(raw["subGroupSize"] if raw.get("subGroupSize") is not None else 1, f"{where}.subGroupSize")
    return SubGroupPolicy(
        name=str(raw.get("name") or ""),
        size=size,
        min_groups=_int(raw.get("minSubGroups") or 0, f"{where}.minSubGroups"),
        selector=selector,
        match_keys=tuple(str(k) for k in raw.get("matchLabelKeys") or ()),
        topology=_topology(topology, f"{where}.networkTopology") if topology is not None else None,
        broken=broken,
    )


def _queue(doc: Obj) -> QueueRecord:
    meta, spec, status = section(doc, "metadata"), section(doc, "spec"), section(doc, "status")
    units: dict[str, Units | None] = {}
    for name, raw in (
        ("capability", spec.get("capability")),
        ("guarantee", (spec.get("guarantee") or {}).get("resource")),
        ("deserved", spec.get("deserved")),
    ):
        try:
            units[name] = resource_list_units(raw) if raw is not None else None
        except ValueError as exc:
            field_name = "guarantee.resource" if name == "guarantee" else name
            raise ValueError(f"spec.{field_name}.{exc}") from exc
    reclaimable = spec.get("reclaimable")
    annotations = dict(meta.get("annotations") or {})
    usage, usage_error = record_of(annotations)
    weight = _int(spec.get("weight", 1) or 1, "spec.weight")
    return QueueRecord(
        name=name_of(doc),
        uid=uid_of(doc) or name_of(doc),
        weight=max(weight, 1),
        capability=units["capability"] or {},
        guarantee=units["guarantee"] or {},
        deserved=units["deserved"],
        reclaimable=True if reclaimable is None else bool(reclaimable),
        # The queue controller opens a queue that has no state yet.
        state=str(status.get("state") or "Open"),
        parent=str(spec.get("parent") or ""),
        priority=_int(spec.get("priority", 0) or 0, "spec.priority"),
        creation=timestamp(meta.get("creationTimestamp")),
        annotations=annotations,
        usage=usage,
        usage_error=usage_error,
    )


def _describe(index: int, doc: Obj) -> str:
    return f"document {index} ({describe(doc)})"


_KINDS: Final = {
    ("v1", "Node"),
    ("v1", "Pod"),
    ("v1", "Namespace"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"),
    ("scheduling.volcano.sh/v1beta1", "Queue"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    (TOPOLOGY_API_VERSION, HYPERNODE_KIND),
    ("v1", "ConfigMap"),  # only a vGPU device config (key device-config.yaml) is kept
}


def add_object(snap: Snapshot, doc: Obj) -> None:
    """Add one object; raises ValueError (without the document prefix) on bad content."""
    kind = doc.get("kind")
    if kind == "List":
        for item in doc.get("items") or []:
            add_object(snap, item)
        return
    if (doc.get("apiVersion"), kind) not in _KINDS:
        known = ", ".join(f"{a} {k}" for a, k in sorted(_KINDS))
        raise ValueError(f"kind: unknown kind {doc.get('apiVersion')!s}/{kind!s} (expected one of: {known})")
    if not name_of(doc):
        raise ValueError("metadata.name: missing")
    if kind == "Node":
        node = _node(doc)
        snap.nodes[node.name] = node
    elif kind == "Pod":
        pod = _pod(doc)
        snap.pods[f"{pod.namespace}/{pod.name}"] = pod
    elif kind == "Namespace":
        snap.namespaces[name_of(doc)] = _labels(doc)
    elif kind == "PodGroup":
        pg = _podgroup(doc)
        snap.podgroups[pg.key] = pg
    elif kind == "Queue":
        queue = _queue(doc)
        snap.queues[queue.name] = queue
    elif kind == HYPERNODE_KIND:
        record, problems = read_hypernode(doc)
        if record is None:
            raise ValueError("; ".join(problems))
        snap.hypernodes[record.name] = record  # a member it cannot read selects nothing, as in Volcano
    elif kind == "ConfigMap":
        _configmap(snap, doc)
    else:
        value = _int(doc.get("value", 0), "value")
        snap.priority_classes[name_of(doc)] = value
        if doc.get("globalDefault"):
            snap.default_priority = value


def _configmap(snap: Snapshot, doc: Obj) -> None:
    key = f"{namespace_of(doc) or 'default'}/{name_of(doc)}"
    data = doc.get("data") or {}
    if CONFIG_KEY not in data:
        snap.device_configs.pop(key, None)
        return
    try:
        snap.device_configs[key] = config_from_configmap(data)
    except ValueError as exc:
        raise ValueError(f"data.{exc}") from exc


def remove_object(snap: Snapshot, doc: Obj) -> None:
    """Forget one object (a watch DELETED event); unknown objects are ignored."""
    name, namespace = name_of(doc), namespace_of(doc) or "default"
    kind = doc.get("kind")
    if kind == "Node":
        snap.nodes.pop(name, None)
    elif kind == "Pod":
        snap.pods.pop(f"{namespace}/{name}", None)
    elif kind == "Namespace":
        snap.namespaces.pop(name, None)
    elif kind == "PodGroup":
        snap.podgroups.pop(f"{namespace}/{name}", None)
    elif kind == "Queue":
        snap.queues.pop(name, None)
    elif kind == "PriorityClass":
        snap.priority_classes.pop(name, None)
    elif kind == HYPERNODE_KIND:
        snap.hypernodes.pop(name, None)
    elif kind == "ConfigMap":
        snap.device_configs.pop(f"{namespace}/{name}", None)


def copy_snapshot(snap: Snapshot) -> Snapshot:
    """A copy a session can own: records are frozen, so copying the maps is enough."""
    return Snapshot(
        nodes=dict(snap.nodes),
        pods=dict(snap.pods),
        podgroups=dict(snap.podgroups),
        queues=dict(snap.queues),
        priority_classes=dict(snap.priority_classes),
        default_priority=snap.default_priority,
        hypernodes=dict(snap.hypernodes),
        nominations={key: dict(subs) for key, subs in snap.nominations.items()},
        device_configs=dict(snap.device_configs),
        namespaces=dict(snap.namespaces),
        idle_reclaimable=snap.idle_reclaimable,
    )


def idle_reclaimable_pods(snap: Snapshot) -> frozenset[str]:
    """The running, GPU-holding pods of the PodGroups whose lapilli.io/IdleGPU condition says Reclaimable: what the
    leader's monitor marked, as far as the PodGroups' status shows it."""
    marked = {key for key, pg in snap.podgroups.items()
              if reclaimable_by_condition((c.type, c.status, c.reason) for c in pg.conditions)}
    if not marked:
        return frozenset()
    return frozenset(key for key, pod in snap.pods.items()
                     if f"{pod.namespace}/{pod.group}" in marked and pod.phase == "Running" and pod.node_name
                     and pod.request.get(GPU, 0.0) > 0)


def build_snapshot(docs: Iterable[object]) -> Snapshot:
    """Build a snapshot from decoded documents; `SnapshotError` names the document, field and problem."""
    snap = Snapshot()
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise SnapshotError(f"document {index}: expected a Kubernetes object, got {type(doc).__name__}")
        try:
            add_object(snap, doc)
        except (ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"{_describe(index, doc)}: {exc}") from exc
    return completed(snap)


def completed(snap: Snapshot) -> Snapshot:
    """`snap` once every object is in: a pod names a PodGroup of the snapshot (else `SnapshotError`), and the
    idle-reclaimable pods are read from the PodGroups' conditions."""
    for key, pod in snap.pods.items():
        if pod.group and f"{pod.namespace}/{pod.group}" not in snap.podgroups:
            raise SnapshotError(
                f"Pod {key}: metadata.annotations.{GROUP_NAME_ANNOTATION}: PodGroup {pod.namespace}/{pod.group} "
                "is not in the snapshot"
            )
    snap.idle_reclaimable = idle_reclaimable_pods(snap)
    return snap
