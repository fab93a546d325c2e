"""A simulation workload: multi-document YAML of Nodes, Queues, PriorityClasses and Volcano Jobs, parsed once.

Each Job carries `sim.lapilli.io/submit-at` (default 0) and `sim.lapilli.io/duration` (required), in seconds
(`600`, `90.5`) or as a Go duration (`10m`, `1h30m`). A job whose tasks exchange data names the two roles in
`sim.lapilli.io/exchange` (`ps,worker`) and what the exchange costs over the network in
`sim.lapilli.io/exchange-cost` (a duration): the job runs that much longer when every pair of those roles sits on
different nodes, and that share of it when some pairs share a node (pairs on one node exchange for free).

A workload may hold `topology.volcano.sh/v1alpha1 HyperNode` documents: the network tree Lapilli's scheduler sees. A
Job's `spec.networkTopology` goes to its PodGroup, and `sim.lapilli.io/tier-penalty` (a fraction, e.g. `0.25`) is
the cost model of a gang spread over the network: each HyperNode tier its pods span beyond the lowest adds that
share of `duration` to its run time (all pods under one leaf: none; over two leaves of one spine: one; across
spines: two, with Volcano's cluster-top root as the tier above the highest HyperNode).

A Job expands as Volcano's job controller would expand it
(reference §3.3–3.4): tasks named `default<i>` when unnamed, pods `<job>-<task>-<i>` whose spec is the task
template's, `minAvailable` defaulted by the webhook to Σ task minAvailable (task minAvailable defaults to
replicas), and a PodGroup whose `minResources` is `calcPGMinResources` over the pods' requests.

Bad input raises `WorkloadError` whose text names the document, the field and the problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import ValidationError

from extender.engine.snapshot import Snapshot, add_object
from lapilli.api import Job, TaskSpec, parse_object
from lapilli.api.constants import DEFAULT_QUEUE
from lapilli.meta import describe
from lapilli.resources.units import MEMORY, PODS, Units, pod_request
from lapilli.times import parse_seconds

SUBMIT_AT: Final = "sim.lapilli.io/submit-at"
DURATION: Final = "sim.lapilli.io/duration"
EXCHANGE: Final = "sim.lapilli.io/exchange"
EXCHANGE_COST: Final = "sim.lapilli.io/exchange-cost"
TIER_PENALTY: Final = "sim.lapilli.io/tier-penalty"
JOB_API_VERSION: Final = "batch.volcano.sh/v1alpha1"
DEFAULT_MAX_PODS: Final = "110"  # kubelet's default --max-pods, for Nodes that do not state `pods`

_PASS_THROUGH: Final = {
    ("v1", "Node"),
    ("scheduling.volcano.sh/v1beta1", "Queue"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("topology.volcano.sh/v1alpha1", "HyperNode"),
    ("v1", "ConfigMap"),  # the vGPU device config (deviceshare): renamed resources, MIG geometries
}


class WorkloadError(ValueError):
    """A workload document that cannot be simulated."""


@dataclass(frozen=True, slots=True)
class SimPodSpec:
    """One pod the job controller creates: `<job>-<task>-<index>` with the task template's spec."""

    name: str
    task: str
    index: int
    position: int  # order in which the controller creates the job's pods (tasks in order, then index)
    spec: Mapping[str, Any]
    request: Units


@dataclass(frozen=True, slots=True)
class SimJob:
    namespace: str
    name: str
    queue: str
    min_available: int
    min_task_member: Mapping[str, int]
    min_resources: Units
    priority_class: str
    submit_at: float
    duration: float
    pods: tuple[SimPodSpec, ...]
    annotations: Mapping[str, str] = field(default_factory=dict)  # the Job's, which its PodGroup inherits
    exchange: tuple[str, str] | None = None  # two roles that exchange data
    exchange_cost: float = 0.0  # seconds added when every pair of them is on different nodes
    network_topology: Mapping[str, Any] | None = None  # the Job's spec.networkTopology, for its PodGroup
    tier_penalty: float = 0.0  # share of `duration` added per HyperNode tier its pods span beyond the lowest

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def run_time(self, node_of: Mapping[str, str | None], spans: int = 0) -> float:
        """How long the job runs with its pods on these nodes (pod name -> node): `duration`, plus the exchange
        cost times the share of exchanging pairs that sit on different nodes, plus the tier penalty for each of
        the `spans` tiers its pods reach beyond the lowest."""
        duration = self.duration * (1.0 + self.tier_penalty * spans)
        if self.exchange is None or self.exchange_cost <= 0:
            return duration
        left = [node_of.get(p.name) for p in self.pods if p.task == self.exchange[0]]
        right = [node_of.get(p.name) for p in self.pods if p.task == self.exchange[1]]
        pairs = [(a, b) for a in left for b in right]
        if not pairs:
            return self.duration
        apart = sum(1 for a, b in pairs if a is None or a != b)
        return duration + self.exchange_cost * apart / len(pairs)


@dataclass(slots=True)
class Workload:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    priority_classes: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[SimJob] = field(default_factory=list)
    hypernodes: list[dict[str, Any]] = field(default_factory=list)
    configmaps: list[dict[str, Any]] = field(default_factory=list)

    def first_jobs(self, count: int) -> Workload:
        """The same cluster with only the first `count` jobs (by submission time, then document order)."""
        ordered = sorted(enumerate(self.jobs), key=lambda item: (item[1].submit_at, item[0]))
        keep = {job.key for _, job in ordered[:count]}
        return Workload(self.nodes, self.queues, self.priority_classes, [j for j in self.jobs if j.key in keep],
                        self.hypernodes, self.configmaps)


def _describe(index: int, doc: Mapping[str, Any]) -> str:
    return f"document {index} ({describe(doc)})"


def _validation_message(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]).lstrip(".")
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {error['msg']}{more}"


def to_resource_list(units: Units) -> dict[str, str]:
    """Volcano units back to a ResourceList that `build_snapshot` reads to the same numbers."""
    out: dict[str, str] = {}
    for name, value in sorted(units.items()):
        if name in (MEMORY, PODS):
            out[name] = str(round(value))
        else:
            out[name] = f"{round(value)}m"
    return out


def _add(into: Units, other: Mapping[str, float]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0.0) + value


def _task_min(task: TaskSpec) -> int:
    return task.min_available if task.min_available is not None else task.replicas


def min_resources(
    tasks: Sequence[TaskSpec], pods: Sequence[SimPodSpec], need: int, priorities: Mapping[str, int]
) -> Units:
    """Volcano's `calcPGMinResources`: the requests of the first `need` pods, tasks by template priority."""
    by_task: dict[str, list[SimPodSpec]] = {}
    for pod in pods:
        by_task.setdefault(pod.task, []).append(pod)

    def priority(task: TaskSpec) -> int:
        return priorities.get(str(task.template.get("spec", {}).get("priorityClassName") or ""), 0)

    ordered = sorted(tasks, key=priority, reverse=True)  # stable: equal priorities keep spec order
    total: Units = {}
    counted = 0
    if need < sum(_task_min(t) for t in tasks):
        for task in ordered:
            for pod in by_task.get(task.name, []):
                if counted >= need:
                    return total
                _add(total, pod.request)
                counted += 1
        return total
    taken: dict[str, int] = {}
    for task in ordered:
        take = min(_task_min(task), need - counted)
        for pod in by_task.get(task.name, [])[:take]:
            _add(total, pod.request)
        taken[task.name] = take
        counted += take
    for task in ordered:
        if counted >= need:
            break
        extra = min(task.replicas - taken[task.name], need - counted)
        for pod in by_task.get(task.name, [])[taken[task.name] : taken[task.name] + extra]:
            _add(total, pod.request)
        counted += extra
    return total


def _job(doc: Mapping[str, Any], queues: set[str], priorities: Mapping[str, int]) -> SimJob:
    try:
        model = parse_object(doc)
    except ValidationError as exc:
        raise ValueError(_validation_message(exc)) from None
    assert isinstance(model, Job)
    annotations = model.metadata.annotations or {}
    submit_at = 0.0
    if SUBMIT_AT in annotations:
        try:
            submit_at = parse_seconds(annotations[SUBMIT_AT])
        except ValueError as exc:
            raise ValueError(f"metadata.annotations.{SUBMIT_AT}: {exc}") from None
    if DURATION not in annotations:
        raise ValueError(f"metadata.annotations.{DURATION}: missing (how long the job runs once started)")
    try:
        duration = parse_seconds(annotations[DURATION])
    except ValueError as exc:
        raise ValueError(f"metadata.annotations.{DURATION}: {exc}") from None
    tasks = [t.model_copy(update={"name": t.name or f"default{i}"}) for i, t in enumerate(model.spec.tasks)]
    name = model.metadata.name or ""
    if not name:
        raise ValueError("metadata.name: missing")
    pods: list[SimPodSpec] = []
    for t_index, task in enumerate(tasks):
        spec = dict(task.template.get("spec") or {})
        if model.spec.priority_class_name and not spec.get("priorityClassName"):
            spec["priorityClassName"] = model.spec.priority_class_name
        try:
            request = pod_request(spec)
        except ValueError as exc:
            raise ValueError(f"spec.tasks[{t_index}].template.spec.containers[].resources.{exc}") from None
        for i in range(task.replicas):
            pods.append(SimPodSpec(f"{name}-{task.name}-{i}", task.name, i, len(pods), spec, request))
    exchange, exchange_cost = _exchange(annotations, {t.name for t in tasks})
    tier_penalty = 0.0
    if TIER_PENALTY in annotations:
        try:
            tier_penalty = float(annotations[TIER_PENALTY])
        except ValueError:
            raise ValueError(f"metadata.annotations.{TIER_PENALTY}: {annotations[TIER_PENALTY]!r} is not a number "
                             "(the share of duration added per tier spanned, e.g. 0.25)") from None
        if tier_penalty < 0:
            raise ValueError(f"metadata.annotations.{TIER_PENALTY}: must be ≥ 0, got {tier_penalty:g}")
    topology = model.spec.network_topology
    need = model.spec.min_available or sum(_task_min(t) for t in tasks)
    if need > len(pods):
        raise ValueError(f"spec.minAvailable: {need} is greater than the {len(pods)} replicas of all tasks")
    if model.spec.queue not in queues:
        raise ValueError(f"spec.queue: queue {model.spec.queue!r} is not in the workload")
    return SimJob(
        namespace=model.metadata.namespace or "default",
        name=name,
        queue=model.spec.queue,
        min_available=need,
        min_task_member={t.name: _task_min(t) for t in tasks},
        min_resources=min_resources(tasks, pods, need, priorities),
        priority_class=model.spec.priority_class_name,
        submit_at=submit_at,
        duration=duration,
        pods=tuple(pods),
        annotations=dict(annotations),
        exchange=exchange,
        exchange_cost=exchange_cost,
        network_topology=topology.to_wire() if topology is not None else None,
        tier_penalty=tier_penalty,
    )


def _exchange(annotations: Mapping[str, str], roles: set[str]) -> tuple[tuple[str, str] | None, float]:
    if EXCHANGE not in annotations and EXCHANGE_COST not in annotations:
        return None, 0.0
    if EXCHANGE not in annotations or EXCHANGE_COST not in annotations:
        raise ValueError(f"metadata.annotations: {EXCHANGE} and {EXCHANGE_COST} go together")
    names = [r.strip() for r in annotations[EXCHANGE].split(",")]
    if len(names) != 2 or not all(names):
        raise ValueError(f"metadata.annotations.{EXCHANGE}: expected two task names like 'ps,worker'")
    for name in names:
        if name not in roles:
            raise ValueError(f"metadata.annotations.{EXCHANGE}: the job has no task {name!r}")
    try:
        cost = parse_seconds(annotations[EXCHANGE_COST])
    except ValueError as exc:
        raise ValueError(f"metadata.annotations.{EXCHANGE_COST}: {exc}") from None
    return (names[0], names[1]), cost


def _check_kind(doc: Mapping[str, Any]) -> None:
    kind = (doc.get("apiVersion"), doc.get("kind"))
    if kind not in _PASS_THROUGH and kind != (JOB_API_VERSION, "Job"):
        known = ", ".join(f"{a} {k}" for a, k in sorted([*_PASS_THROUGH, (JOB_API_VERSION, "Job")]))
        raise ValueError(f"kind: unknown kind {kind[0]!s}/{kind[1]!s} (a workload holds {known})")


def _with_default_max_pods(doc: Mapping[str, Any]) -> dict[str, Any]:
    status = dict(doc.get("status") or {})
    key = "allocatable" if "allocatable" in status else "capacity"
    resources = dict(status.get(key) or {})
    resources.setdefault(PODS, DEFAULT_MAX_PODS)
    status[key] = resources
    return {**doc, "status": status}


def load_workload(docs: Sequence[Any]) -> Workload:
    """Parse decoded YAML documents into a workload; `WorkloadError` names the document, field and problem."""
    work = Workload()
    scratch = Snapshot()  # validates Nodes, Queues and PriorityClasses exactly as `lapilli schedule` would
    jobs: list[tuple[int, Mapping[str, Any]]] = []
    for index, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise WorkloadError(f"document {index}: expected a Kubernetes object, got {type(doc).__name__}")
        try:
            _check_kind(doc)
            if doc.get("kind") == "Job":
                jobs.append((index, doc))
                continue
            if doc.get("kind") == "Node":
                doc = _with_default_max_pods(doc)
            add_object(scratch, doc)
        except (ValueError, KeyError, TypeError) as exc:
            raise WorkloadError(f"{_describe(index, doc)}: {exc}") from None
        {"Node": work.nodes, "Queue": work.queues, "PriorityClass": work.priority_classes,
         "HyperNode": work.hypernodes, "ConfigMap": work.configmaps}[doc["kind"]].append(dict(doc))
    queues = {*scratch.queues, DEFAULT_QUEUE}
    seen: set[str] = set()
    for index, doc in jobs:
        try:
            job = _job(doc, queues, scratch.priority_classes)
        except (ValueError, KeyError, TypeError) as exc:
            raise WorkloadError(f"{_describe(index, doc)}: {exc}") from None
        if job.key in seen:
            raise WorkloadError(f"{_describe(index, doc)}: metadata.name: a second Job named {job.key}")
        seen.add(job.key)
        work.jobs.append(job)
    if not work.nodes:
        raise WorkloadError("workload: no Node documents (nothing to schedule onto)")
    return work


def gpus(units: Mapping[str, float]) -> float:
    """Whole GPUs in a request or allocatable (Volcano keeps scalar resources in milli-units)."""
    return units.get("nvidia.com/gpu", 0.0) / 1000.0


__all__ = [
    "DURATION",
    "EXCHANGE",
    "EXCHANGE_COST",
    "SUBMIT_AT",
    "TIER_PENALTY",
    "SimJob",
    "SimPodSpec",
    "Workload",
    "WorkloadError",
    "gpus",
    "load_workload",
    "min_resources",
    "to_resource_list",
]
