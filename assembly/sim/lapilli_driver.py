"""Lapilli's scheduler in the simulation: each cycle is one engine session over a fresh snapshot.

The snapshot holds what the API server would: the workload's Nodes, Queues (plus the `default` queue Volcano's
scheduler creates when missing) and PriorityClasses, and for each submitted, unfinished job its PodGroup (named
after the job, phase carried over from the previous session) and its pods (placed ones `Running` on their node).
Binds place pods at once, evictions send them back to pending; pipelined pods wait for a later cycle.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from assembly.sim.state import Cluster, JobState, PodState
from assembly.sim.workload import to_resource_list
from extender.engine.conf import DEFAULT_CONF, SchedulerConf
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import (
    GROUP_NAME_ANNOTATION,
    TASK_SPEC_KEY,
    PodGroupRecord,
    PodRecord,
    Snapshot,
    add_object,
    build_snapshot,
    completed,
)
from extender.engine.usage import ancestors_of, conf_args, held_by_queue
from lapilli.api.constants import DEFAULT_QUEUE
from lapilli.devices.assign import assignment_annotations
from lapilli.meta import annotations_of, name_of
from lapilli.resources.units import Units
from lapilli.times import rfc3339_micro
from lapilli.usage import HELD_BACK, USAGE_ANNOTATION, UsageRecord, advance, record_of

# Volcano's default configuration with GPU-aware binpack added to the second tier.
SIM_CONF: Final = DEFAULT_CONF.rstrip() + "\n  - name: binpack\n"
EPOCH: Final = datetime(2024, 1, 1, tzinfo=UTC)
# A job created before the simulation starts (a replay of a live cluster): its PodGroup's creation, in seconds from
# the simulation's start (negative), so jobs keep their real order.
CREATED_AT: Final = "sim.lapilli.io/created-at"


def sim_conf(text: str | None = None) -> SchedulerConf:
    """The simulator's scheduler conf: `text` (Volcano's format) or the default conf plus binpack."""
    return parse_scheduler_conf(text if text is not None else SIM_CONF)


def _timestamp(seconds: float, epoch: float | None = None) -> str:
    return rfc3339_micro((EPOCH.timestamp() if epoch is None else epoch) + seconds)


def _default_queue() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": DEFAULT_QUEUE},
        "spec": {"weight": 1, "reclaimable": True},
        "status": {"state": "Open"},
    }


def podgroup_document(state: JobState, epoch: float | None = None) -> dict[str, Any]:
    job = state.job
    created = float(job.annotations[CREATED_AT]) if CREATED_AT in job.annotations else (state.submitted or 0.0)
    spec: dict[str, Any] = {
        "minMember": job.min_available,
        "minTaskMember": dict(job.min_task_member),
        "minResources": to_resource_list(job.min_resources),
        "queue": job.queue,
    }
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    if job.network_topology is not None:
        spec["networkTopology"] = dict(job.network_topology)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "uid": job.key,
            "creationTimestamp": _timestamp(created, epoch),
            "annotations": dict(job.annotations),  # Volcano's job controller copies them (task-topology reads)
        },
        "spec": spec,
        "status": {"phase": state.pg_phase},
    }


def pod_document(pod: PodState, group: str, epoch: float | None = None) -> dict[str, Any]:
    spec = dict(pod.spec)
    annotations = {GROUP_NAME_ANNOTATION: group, TASK_SPEC_KEY: pod.task}
    if pod.node is not None:
        spec["nodeName"] = pod.node
        if pod.devices is not None:  # what the Binding wrote: the scheduler's next session counts these cards
            annotations.update(assignment_annotations(pod.node, pod.devices, 0))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.key,
            "creationTimestamp": _timestamp(pod.created, epoch),
            "labels": {TASK_SPEC_KEY: pod.task},
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Running" if pod.node is not None else "Pending"},
    }


class LapilliScheduler:
    """One engine session per cycle; a cycle reports whether it changed anything.

    With a `fairshare` entry in the conf it also does what the service's leader does: keeps each queue's decayed
    usage record (`lapilli.usage`) and hands it to the session as the Queue's annotation. Between two events
    nothing changes, so `elapse` advances every record exactly over the interval with what each queue (and each
    level above it) held; `usage_history` keeps each queue's usage after every interval (Volcano units × s)."""

    name: Final = "lapilli"

    def __init__(self, conf: SchedulerConf | None = None, epoch: float | None = None) -> None:
        """`epoch`: the wall-clock time of the simulation's start (default 2024-01-01); a Queue that carries a usage
        record at the start (a replay of a live cluster) continues from it."""
        self.conf = conf if conf is not None else sim_conf()
        self.epoch = EPOCH.timestamp() if epoch is None else epoch
        self.fairshare = conf_args((p.name, p.arguments) for t in self.conf.tiers for p in t.plugins)
        self.records: dict[str, UsageRecord] = {}
        self._seeded = False
        self.usage_history: list[tuple[float, dict[str, Units]]] = []
        # What `snapshot` reuses between cycles: the fixed objects, and each PodGroup's (phase, record) and each
        # pod's (node, record) as the last cycle read them.
        self._base: Snapshot | None = None
        self._podgroups: dict[str, tuple[str, PodGroupRecord]] = {}
        self._pods: dict[str, tuple[str | None, PodRecord]] = {}

    def elapse(self, cluster: Cluster, start: float, end: float) -> None:
        args = self.fairshare
        if args is None or end <= start:
            return
        queues = cluster.workload.queues
        if not self._seeded:
            self._seeded = True
            for queue in queues:
                record, _ = record_of(annotations_of(queue))
                if record is not None:
                    self.records[name_of(queue)] = record
        ancestors = ancestors_of({name_of(q): str((q.get("spec") or {}).get("parent") or "") for q in queues})
        pairs = [(cluster.jobs[p.job].job.queue, p.request) for p in cluster.pods.values() if p.node is not None]
        held = held_by_queue(pairs, ancestors)
        # A record seeded from a Queue (a replay of a live cluster) may be older than `start`: what the queue held
        # before the simulation is counted as the leader's next sample would count it (`UsageRecord.next_sample`).
        since = self.epoch + start - HELD_BACK * args.sampling_interval
        for name in ancestors:
            record = self.records.get(name)
            usage = record.at_time(self.epoch + end, args.half_life, held.get(name, {}), since) if record else advance(
                {}, held.get(name, {}), end - start, args.half_life)
            self.records[name] = UsageRecord(self.epoch + end, args.half_life, usage)
        self.usage_history.append((end, {name: dict(r.usage) for name, r in self.records.items()}))

    def _queue_document(self, queue: dict[str, Any]) -> dict[str, Any]:
        record = self.records.get(name_of(queue))
        if record is None:
            return queue
        meta = dict(queue.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), USAGE_ANNOTATION: record.to_annotation()}
        return {**queue, "metadata": meta}

    def documents(self, cluster: Cluster) -> list[dict[str, Any]]:
        work = cluster.workload
        queues = [self._queue_document(q) for q in work.queues]
        docs: list[dict[str, Any]] = [*work.nodes, *work.hypernodes, *work.priority_classes, *queues,
                                      *work.configmaps]
        if all(name_of(q) != DEFAULT_QUEUE for q in work.queues):
            docs.append(_default_queue())
        for state in cluster.jobs.values():
            if state.active:
                docs.append(podgroup_document(state, self.epoch))
        for pod in cluster.pods.values():
            docs.append(pod_document(pod, cluster.jobs[pod.job].job.name, self.epoch))
        return docs

    def snapshot(self, cluster: Cluster) -> Snapshot:
        """`build_snapshot(self.documents(cluster))`, reusing the records of what did not change since the last
        cycle (records are frozen values of their documents): the workload's Nodes, HyperNodes and PriorityClasses
        are read once, a pod again only when it moved, a PodGroup when its phase changed. A replay's cycles differ
        by a few pods, and reading every pod of a large cluster each cycle was most of their cost."""
        work = cluster.workload
        base = self._base
        if base is None:
            base = self._base = Snapshot()
            for doc in [*work.nodes, *work.hypernodes, *work.priority_classes]:
                add_object(base, doc)
        snap = Snapshot(nodes=dict(base.nodes), hypernodes=dict(base.hypernodes),
                        priority_classes=dict(base.priority_classes), default_priority=base.default_priority)
        try:
            for queue in [self._queue_document(q) for q in work.queues]:
                add_object(snap, queue)
            if all(name_of(q) != DEFAULT_QUEUE for q in work.queues):
                add_object(snap, _default_queue())
            groups: dict[str, tuple[str, PodGroupRecord]] = {}
            for key, state in cluster.jobs.items():
                if state.active:
                    kept = self._podgroups.get(key)
                    if kept is None or kept[0] != state.pg_phase:
                        add_object(snap, podgroup_document(state, self.epoch))
                        kept = (state.pg_phase, snap.podgroups[key])
                    snap.podgroups[key] = kept[1]
                    groups[key] = kept
            pods: dict[str, tuple[str | None, PodRecord]] = {}
            for key, pod in cluster.pods.items():
                placed = self._pods.get(key)
                if placed is None or placed[0] != pod.node:
                    add_object(snap, pod_document(pod, cluster.jobs[pod.job].job.name, self.epoch))
                    placed = (pod.node, snap.pods[key])
                snap.pods[key] = placed[1]
                pods[key] = placed
        except (ValueError, KeyError, TypeError):
            return build_snapshot(self.documents(cluster))  # raises naming the document
        self._podgroups, self._pods = groups, pods
        return completed(snap)

    def cycle(self, cluster: Cluster, now: float) -> bool:
        if all(pod.node is not None for pod in cluster.pods.values()):
            # Nothing waits: allocate, backfill, preempt and reclaim all start from a pending pod, and every
            # PodGroup's phase is the one the last session that changed something gave it. A replay of a busy
            # cluster spends most of its events here, once every waiting job has started.
            return False
        result = run_session(self.snapshot(cluster), self.conf, self.epoch + now)
        changed = False
        for key, node in sorted(result.binds.items()):
            pod = cluster.pods.get(key)
            if pod is not None and pod.node != node:
                pod.node, pod.devices = node, result.devices.get(key)
                changed = True
        for key in sorted(result.evictions):
            pod = cluster.pods.get(key)
            if pod is not None and pod.node is not None:
                pod.node, pod.devices = None, None
                changed = True
        for key, status in result.podgroups.items():
            state = cluster.jobs.get(key)
            if state is not None and state.pg_phase != status.phase:
                state.pg_phase = status.phase
                changed = True
        return changed
