"""What the dashboard shows, as plain values computed from the cluster view: queues as a tree (lab → user) with
deserved / allocated / capability per resource, each queue's jobs with state, age and the one-line why, the
nodes' GPU use (each shared card's GPU memory too), and the HyperNode tree with the GPUs free in each domain.
Numbers come from one session of the scheduler's engine and its explain module (the same conf)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from assembly.cli.vcctl import since
from assembly.dashboard.forecast import Forecast
from assembly.dashboard.timeline import Timeline
from assembly.dashboard.topology import Topology, topology
from assembly.why.answer import STARTED_KINDS, condition_line, service_condition
from assembly.why.estimate import jobs_by_podgroup
from assembly.why.gather import ClusterView, Unreadable
from extender.engine.conf import SchedulerConf
from extender.engine.explain import Context, Explanation, explain
from extender.engine.explain.units import number
from extender.engine.results import QueueResult
from extender.engine.run import run_session
from extender.engine.snapshot import QueueRecord
from lapilli.meta import Obj, meta, name_of, owner_references
from lapilli.resources.units import CPU, GPU, MEMORY, PODS
from lapilli.resources.vector import Dims
from lapilli.usage import shown_usage


@dataclass(slots=True)
class Bar:
    resource: str
    deserved: float | None
    allocated: float
    capability: float | None  # None: no limit


@dataclass(slots=True)
class JobRow:
    key: str
    job: str  # the Volcano Job that owns the PodGroup, else ""
    phase: str
    age: str
    kind: str
    why: str
    scheduler: str = ""  # the service's own lapilli.io/Why condition, shown when the page is partial
    estimate: str = ""  # when a waiting Volcano Job is expected to start (assembly.why.estimate)


@dataclass(slots=True)
class QueueRow:
    name: str
    depth: int
    state: str
    weight: int
    share: float
    bars: list[Bar] = field(default_factory=list)
    jobs: list[JobRow] = field(default_factory=list)
    usage: str = "-"  # decayed usage as the leader last sampled it (fairshare), decayed to the page's time


@dataclass(frozen=True, slots=True)
class CardCell:
    """One shared GPU of a node: its memory in use and in all (GB), and how many pods share it."""

    used_gb: float
    memory_gb: float
    pods: int


@dataclass(slots=True)
class NodeRow:
    name: str
    gpus_used: float
    gpus: float
    cpu_used: float
    cpu: float
    cards: list[CardCell] = field(default_factory=list)  # vGPU cards (deviceshare), in card order


@dataclass(slots=True)
class Page:
    queues: list[QueueRow]
    nodes: list[NodeRow]
    conf: str
    at: str
    unreadable: list[str] = field(default_factory=list)  # what the credentials could not read: the page is partial
    missing: list[JobRow] = field(default_factory=list)  # PodGroups whose queue does not exist (or is not readable)
    topology: Topology | None = None  # None: the cluster has no HyperNode
    estimated_at: str = ""  # when the expected starts shown were made, if the cluster changed since
    timeline: Timeline | None = None  # the last day (charts, waits) and the idle-GPU candidates; set by the server


def _parent(queue: Mapping[str, Any]) -> str:
    name = name_of(queue)
    parent = str((queue.get("spec") or {}).get("parent") or "")
    return "" if name == "root" else (parent or "root")


def _tree(queues: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, int]]:
    """(name, depth) in tree order: each queue after its parent, siblings by name."""
    children: dict[str, list[str]] = {}
    for name, queue in queues.items():
        parent = _parent(queue)
        children.setdefault(parent if parent in queues else "", []).append(name)
    out: list[tuple[str, int]] = []

    def walk(parent: str, depth: int) -> None:
        for name in sorted(children.get(parent, [])):
            out.append((name, depth))
            walk(name, depth + 1)

    walk("", 0)
    return out


def _owner_job(pg: Mapping[str, Any]) -> str:
    for ref in owner_references(pg):
        if ref.get("kind") == "Job":
            return str(ref.get("name") or "")
    return ""


def build(view: ClusterView, conf: SchedulerConf, conf_where: str, closed_by: Mapping[str, str],
          now: datetime | None = None, unreadable: Sequence[Unreadable] = (), jobs: Sequence[Obj] = (),
          forecast: Forecast | None = None) -> Page:
    """`unreadable`: what the credentials could not read besides `view.unreadable` (the conf's ConfigMap); `jobs`:
    the cluster's Volcano Jobs, and `forecast` a start-time replay over them (`assembly.dashboard.forecast`), for
    the waiting ones' expected start (none without them)."""
    now = now or datetime.now(UTC)
    snap = view.snapshot
    result = run_session(snap, conf, now.timestamp())
    answers = explain(snap, conf, None, Context(queue_closed_by=dict(closed_by)), now.timestamp())
    dims = result.dims
    raw_queues = view.objects.get("Queue", {})
    raw_pgs = view.objects.get("PodGroup", {})
    gaps = [*view.unreadable, *unreadable]
    starts = _starts(view, jobs, answers, forecast, now)
    by_queue: dict[str, list[JobRow]] = {}
    for key, answer in sorted(answers.items()):
        pg = raw_pgs.get(key) or {}
        cond = service_condition(pg) if gaps else None
        by_queue.setdefault(answer.queue, []).append(JobRow(
            key, _owner_job(pg), answer.phase, since(meta(pg).get("creationTimestamp"), now), str(answer.kind),
            answer.headline, condition_line(cond) if cond is not None else "", starts.get(key, "")))
    rows: list[QueueRow] = []
    for name, depth in _tree(raw_queues):
        record = snap.queues.get(name)
        computed = result.queues.get(name)
        row = QueueRow(name, depth, record.state if record else "", record.weight if record else 0,
                       computed.share if computed else 0.0)
        row.usage = shown_usage(meta(raw_queues.get(name)).get("annotations") or {}, now.timestamp())
        row.bars = _bars(record, computed, dims) if record is not None else []
        row.jobs = by_queue.pop(name, [])
        rows.append(row)
    nodes = []
    room = result.nodes
    if room is not None:
        for i, node in enumerate(room.names):
            gpu_used, gpus = _use(room.allocatable[i], room.idle[i], dims.index, GPU)
            cpu_used, cpu = _use(room.allocatable[i], room.idle[i], dims.index, CPU)
            cards = [CardCell(used / 1024, memory / 1024, pods)
                     for _, used, memory, pods, _ in result.cards.get(node, ())]
            nodes.append(NodeRow(node, gpu_used, gpus, cpu_used, cpu, cards))
    missing = [job for queue in sorted(by_queue) for job in by_queue[queue]]
    tree = topology(view.objects.get("HyperNode", {}).values(), view.objects.get("Node", {}),
                    {n.name: (n.gpus_used, n.gpus) for n in nodes})
    return Page(rows, nodes, conf_where, now.strftime("%Y-%m-%d %H:%M:%S UTC"), [str(u) for u in gaps], missing,
                tree)


def _bars(record: QueueRecord, computed: QueueResult | None, dims: Dims) -> list[Bar]:
    """Allocated / deserved / capability of each resource the queue has any of (pods left out)."""
    bars = []
    for i, resource in enumerate(dims.names):
        if resource == PODS:
            continue
        allocated = float(computed.allocated[i]) if computed else 0.0
        deserved = float(computed.deserved[i]) if computed and computed.deserved is not None else None
        cap = record.capability.get(resource)
        if not allocated and not deserved and cap is None:
            continue
        bars.append(Bar(resource, number(resource, deserved) if deserved is not None else None,
                        number(resource, allocated), number(resource, cap) if cap is not None else None))
    return bars


def _starts(view: ClusterView, jobs: Sequence[Obj], answers: Mapping[str, Explanation], forecast: Forecast | None,
            now: datetime) -> dict[str, str]:
    """PodGroup -> its Volcano Job's expected start, for the jobs that wait (one replay for all of them)."""
    waiting = [key for key, answer in answers.items() if answer.kind not in STARTED_KINDS]
    if not jobs or not waiting or forecast is None:
        return {}
    owners = jobs_by_podgroup(jobs, view.objects.get("PodGroup", {}))
    expected = forecast.seen_at(now.timestamp())
    return {key: expected[owners[key]].text() for key in waiting if owners.get(key) in expected}


def _use(allocatable: Any, idle: Any, index: Mapping[str, int], resource: str) -> tuple[float, float]:
    """(used, allocatable) of one resource on one node, in people's units."""
    if resource not in index:
        return 0.0, 0.0
    d = index[resource]
    total = float(allocatable[d])
    return number(resource, total - float(idle[d])), number(resource, total)


def fraction(part: float, whole: float | None) -> float:
    if whole is None or not math.isfinite(whole) or whole <= 0:
        return 0.0
    return max(0.0, min(part / whole, 1.0))


__all__ = ["MEMORY", "Bar", "JobRow", "NodeRow", "Page", "QueueRow", "build", "fraction"]
