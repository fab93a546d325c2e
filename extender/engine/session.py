"""One scheduling cycle over a snapshot (Volcano's `framework/session.go`).

The session turns the snapshot's records into tasks, jobs, queues and node arrays, opens the configured plugins
(each sees it as a `SessionView` and registers callbacks by kind; `callbacks.py` combines them into the votes the
actions ask for) and answers where tasks can go (`placement.py`), with a `Status` when nowhere. Only a `Statement`
changes task placement; `_place`/`_unplace`/`_release`/`_unrelease`/`_set_status` here are the primitive moves it
records with their inverses, private to it. Explain's trial placements are a Statement too, one that is always
discarded (`trial`); `statement.py` is built on this module, so `run.py` hands the Statement class in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from extender.engine.callbacks import Callbacks
from extender.engine.conf import SchedulerConf
from extender.engine.hypernodes import build_subjobs, default_subjob, prepare, session_topology
from extender.engine.interface import PURPOSE_EVICT, Code, QueueReport, SessionProbe, Status, Trial
from extender.engine.model import (
    ALLOCATED_STATUS,
    NO_LABELS,
    ON_NODE_STATUS,
    PREEMPTABLE_STATUS,
    TASK_STATUSES,
    Job,
    Node,
    NodeArrays,
    Queue,
    SubJob,
    Task,
    TaskStatus,
)
from extender.engine.placement import Index, Mask, Placement, Scores
from extender.engine.snapshot import PodRecord, Snapshot
from extender.engine.usage import FairShareArgs, conf_args, decayed
from lapilli.devices.assign import PodDevices
from lapilli.devices.config import DeviceConfig
from lapilli.resources.vector import TOLERANCE, Dims, Vec
from lapilli.usage import mean_life


class PodGroupEvent(NamedTuple):
    """An event a plugin raised for a PodGroup this session (Volcano's `ssn.recorder` on the PodGroup)."""

    key: str
    type: str
    reason: str
    message: str


class EvictionNote(NamedTuple):
    """Why a pod is evicted, for the Event on it and on its PodGroup and the PodGroup's condition (Volcano's
    `Statement.Evict(task, reason)`, with the reason naming who the room is for)."""

    action: str  # gangpreempt | gangreclaim | preempt | reclaim
    preemptor: str  # the PodGroup (ns/name) the room is made for
    message: str  # one line: what is evicted, for whom, and why that is allowed


@dataclass(slots=True)
class SessionRecords:
    binds: dict[str, str] = field(default_factory=dict)
    evictions: list[str] = field(default_factory=list)
    events: list[PodGroupEvent] = field(default_factory=list)
    eviction_notes: dict[str, EvictionNote] = field(default_factory=dict)  # pod key -> why it is evicted
    # PodGroup -> sub-gang -> HyperNode: where gang eviction made room, for the next sessions' allocate
    nominations: dict[str, dict[str, str]] = field(default_factory=dict)


def _priority(pod: PodRecord, snap: Snapshot) -> int:
    if pod.task_priority is not None:
        return pod.task_priority
    if pod.spec_priority is not None:
        return pod.spec_priority
    # The Priority admission plugin would have resolved the class; do it here for hand-written snapshots.
    if pod.priority_class in snap.priority_classes:
        return snap.priority_classes[pod.priority_class]
    return 1


class Session(Callbacks):
    def __init__(self, snap: Snapshot, conf: SchedulerConf, now: float = 0.0,
                 probe: SessionProbe | None = None, *, statements: Callable[[Session], Trial],
                 parked: frozenset[str] = frozenset()) -> None:
        """`statements` makes a Statement over this session (the `Statement` class): what `trial` returns.
        `parked`: jobs no action tries and no result is made for (`parking.py`)."""
        super().__init__(conf, probe)
        self._statements = statements
        self.now = now
        self.parked = parked
        self.tried: set[str] = set()  # jobs allocate took a turn on (parking.parkable)
        self._fit_texts: dict[str, str] | None = None  # `job_fit_error` by job, from close on
        self.records = SessionRecords()
        names: set[str] = set()
        for n in snap.nodes.values():
            names.update(n.allocatable)
        names.update(*[p.request for p in snap.pods.values()])  # one call: the keys are read in C
        for q in snap.queues.values():
            names.update(q.capability, q.guarantee, q.deserved or {})
        for g in snap.podgroups.values():
            names.update(g.min_resources or {})
        self.dims = Dims(sorted(names))
        self._vectors: dict[tuple[tuple[str, float], ...], Vec] = {}
        self._build_nodes(snap)
        self._build_queues(snap)
        self._build_jobs(snap)
        self._build_topology(snap)
        self.queue_reports: dict[str, QueueReport] = {}
        self.conditions: dict[str, tuple[str, str, str]] = {}
        self._device_configs = dict(snap.device_configs)
        self.assignments: dict[str, PodDevices] = {}
        self.card_report: Mapping[str, tuple[tuple[str, int, int, int, int], ...]] = {}
        self._open_plugins(self)
        self.placement.plug(self.predicates.all(), self.node_orders.all(), self.node_locals.all(),
                            self.node_bonuses.all())

    # ---- building -------------------------------------------------------------------------------------------
    def _build_nodes(self, snap: Snapshot) -> None:
        ready = sorted((n for n in snap.nodes.values() if n.ready), key=lambda n: n.name)
        self.nodes: list[Node] = [
            Node(name=n.name, idx=i, labels=n.labels, taints=n.taints, unschedulable=n.unschedulable,
                 cards=n.cards.cards)
            for i, n in enumerate(ready)
        ]
        self.node_by_name: dict[str, Node] = {n.name: n for n in self.nodes}
        size = (len(self.nodes), self.dims.size)
        alloc = np.zeros(size)
        for i, n in enumerate(ready):
            alloc[i] = self._vector(n.allocatable)  # nodes come from a few shapes too
        self.arrays = NodeArrays.of(alloc)
        self.placement = Placement(self.nodes, self.arrays, self.dims)
        self.total: Vec = alloc.sum(axis=0) if len(self.nodes) else self.dims.zeros()

    def _build_queues(self, snap: Snapshot) -> None:
        self.queues: dict[str, Queue] = {}
        for q in snap.queues.values():
            capability = self.dims.vector(q.capability, missing=np.inf)
            self.queues[q.name] = Queue(
                uid=q.uid,
                name=q.name,
                weight=q.weight,
                capability=capability,
                guarantee=self.dims.vector(q.guarantee),
                deserved_spec=self.dims.vector(q.deserved) if q.deserved is not None else None,
                reclaimable=q.reclaimable,
                state=q.state,
                parent=q.parent,
                priority=q.priority,
                creation=q.creation,
                annotations=dict(q.annotations),
                has_capability={k: True for k in q.capability},
                has_deserved={k: True for k in (q.deserved or {})},
            )
        args = conf_args((p.name, p.arguments) for t in self.conf.tiers for p in t.plugins)
        if args is not None:
            self._add_usage(snap, args)

    def _add_usage(self, snap: Snapshot, args: FairShareArgs) -> None:
        """Each queue's decayed usage at `now` (and the share plugins' bias): data the snapshot carried."""
        tau = mean_life(args.half_life)
        for name, units in decayed(snap, args, self.now).items():
            queue = self.queues[name]
            queue.usage = self.dims.vector({k: v for k, v in units.items() if k in self.dims.index})
            if args.share_weight > 0:
                queue.share_bias = queue.usage * (args.share_weight / tau)

    def _vector(self, units: Mapping[str, float], key: tuple[tuple[str, float], ...] | None = None) -> Vec:
        """`dims.vector(units)`, shared between equal resource lists (read-only, so sharing is safe): a snapshot's
        nodes, pods and PodGroups come from a few templates. `key`: `units`' items, when the caller has them already."""
        if key is None:
            return self._vector_of(units, tuple(units.items()))
        # Pods' keys are shared tuples (`snapshot._shared_request_key`): found by identity, no tuple hashed. Sound
        # while the jobs are built: the snapshot keeps every key passed in alive, so no id is reused meanwhile.
        vec = self._vectors_by_id.get(id(key))
        if vec is None:
            vec = self._vectors_by_id[id(key)] = self._vector_of(units, key)
        return vec

    def _vector_of(self, units: Mapping[str, float], key: tuple[tuple[str, float], ...]) -> Vec:
        vec = self._vectors.get(key)
        if vec is None:
            vec = self._vectors[key] = self.dims.vector(units)
            vec.flags.writeable = False
        return vec

    def _build_jobs(self, snap: Snapshot) -> None:
        self._vectors_by_id: dict[int, Vec] = {}
        self.jobs: dict[str, Job] = {}
        for pg in snap.podgroups.values():
            if pg.queue not in self.queues:
                continue  # Volcano drops jobs whose queue does not exist from the snapshot
            priority = snap.priority_classes.get(pg.priority_class, snap.default_priority or 0)
            self.jobs[pg.key] = Job(
                uid=pg.key,
                namespace=pg.namespace,
                name=pg.name,
                queue=pg.queue,
                min_member=pg.min_member,
                min_task_member=pg.min_task_member,
                min_resources=self._vector(pg.min_resources) if pg.min_resources is not None else None,
                priority=priority,
                creation=pg.creation,
                phase=pg.phase,
                preemptable=pg.preemptable,
                allocated=self.dims.zeros(),
                annotations=pg.annotations,
                conditions=pg.conditions,
                gang_evictable=pg.gang_evictable,
            )
        self.tasks: dict[str, Task] = {}
        self.other_tasks: list[Task] = []
        best_effort: dict[int, bool] = {}  # by id of the shared request vector
        jobs, namespaces = self.jobs, snap.namespaces
        self.pod_terms = False
        # By (namespace, name): two stable sorts on one string each compare faster than one on pairs.
        by_name = sorted(snap.pods.values(), key=attrgetter("name"))
        # The last pod's request key (shared between equal requests), its vector and whether it is best-effort:
        # a gang's pods come one after another with one key, so most pods skip both look-ups.
        last_key: tuple[tuple[str, float], ...] | None = None
        resreq, empty = self.dims.zeros(), False
        for pod in sorted(by_name, key=attrgetter("namespace")):
            job = jobs.get(pod.group_key) if pod.group_key else None
            if pod.request_key is not last_key:
                last_key = pod.request_key
                resreq = self._vector(pod.request, last_key)
                found = best_effort.get(id(resreq))
                if found is None:
                    found = best_effort[id(resreq)] = all(v < TOLERANCE for k, v in pod.request.items() if k != "pods")
                empty = found
            if pod.terms is not None:
                self.pod_terms = True
            # Positional, in field order: keyword arguments double the cost of building 50,000 tasks.
            task = Task(
                pod.uid,  # uid
                pod.namespace,  # namespace
                pod.name,  # name
                job.uid if job is not None else "",  # job
                pod.role,  # role
                resreq,  # resreq
                _priority(pod, snap),  # priority
                pod.status,  # status
                pod.node_name,  # node
                pod.creation,  # creation
                empty,  # best_effort
                pod.preemptable,  # preemptable
                pod.placement,  # placement
                pod.priority_class,  # priority_class
                pod.nominated_node,  # nominated_node
                pod.preemption_never,  # preemption_never
                pod.host_ports,  # host_ports
                pod.predicate_key,  # predicate_key
                pod.devices,  # devices
                pod.index,  # index
                None,  # device_ask (the deviceshare plugin's)
                pod.labels,  # labels
                namespaces.get(pod.namespace, NO_LABELS),  # namespace_labels
                pod.terms,  # terms
                bool(pod.host_ports),  # dynamic: where it may go depends on the ports other pods hold
                False,  # rescored
                False,  # idle
                "",  # job_hypernode
                pod.key,  # key
            )
            if task.node is not None and task.status in ON_NODE_STATUS:
                node = self.node_by_name.get(task.node)
                if node is not None:
                    self._occupy(task, node, 1)
                    if task.status is TaskStatus.RELEASING:
                        self.arrays.releasing[node.idx] += task.resreq
                        self.placement.touch(node.idx)
            if job is not None:
                job.add_task(task)
                self.tasks[task.uid] = task
            else:
                self.other_tasks.append(task)
        self._vectors_by_id.clear()  # ids are only sound while this loop holds the snapshot's records
        self.idle_tasks: list[Task] = []
        for key in sorted(snap.idle_reclaimable):
            marked = snap.pods.get(key)
            idle = self.tasks.get(marked.uid) if marked is not None else None
            if idle is not None and idle.status in PREEMPTABLE_STATUS:
                idle.idle = True
                self.idle_tasks.append(idle)

    def _build_topology(self, snap: Snapshot) -> None:
        """The HyperNode tree over this session's nodes, the jobs' sub-gangs, then Volcano's session preparation
        (tier names, soft → hard, allocated HyperNodes, nominations)."""
        self.topology = session_topology(snap.hypernodes.values(), self.nodes)
        for pg in snap.podgroups.values():
            job = self.jobs.get(pg.key)
            if job is not None and (pg.network_topology is not None or pg.sub_groups):
                labels = {}  # read only by subGroupPolicy selectors and match keys
                if pg.sub_groups:
                    labels = {t.uid: snap.pods[t.key].labels for t in job.tasks.values() if t.key in snap.pods}
                build_subjobs(job, pg, labels)
        for key in snap.nominations:
            if key in self.jobs and self.jobs[key].subjobs is None:
                default_subjob(self.jobs[key])
        prepare(self.jobs.values(), self.topology, snap.nominations)
        for key, subs in snap.nominations.items():
            job = self.jobs.get(key)
            for sub, hypernode in subs.items():
                if job is not None and job.subjobs is not None and sub in job.subjobs:
                    self.records.nominations.setdefault(key, {})[sub] = hypernode

    def nominate(self, job: Job, subjob: str, hypernode: str) -> None:
        """Volcano's `ApplySubJobNominations`: gang preemption or reclaim made room for sub-gang `subjob` of `job`
        in `hypernode` ("" clears it). Allocate honours it in this and later sessions (`allocate_from_nomination`)
        until the sub-gang is placed or the nomination no longer holds; the service carries it between sessions
        (`Decisions.nominations`)."""
        if subjob == job.uid:
            default_subjob(job)
        if job.subjobs is None or subjob not in job.subjobs:
            return
        job.subjobs[subjob].nominated_hypernode = hypernode
        if hypernode:
            self.records.nominations.setdefault(job.uid, {})[subjob] = hypernode
        else:
            self.records.nominations.get(job.uid, {}).pop(subjob, None)

    def hypernode_scores(self, subjob: SubJob, hypernodes: Sequence[str]) -> dict[str, float]:
        """The HyperNode scores of `hypernode_score_array` by name."""
        scores = self.hypernode_score_array(subjob, self.topology.indices(hypernodes)).tolist()
        return dict(zip(hypernodes, scores, strict=True))

    def candidate_domains(self, job: Job, max_domains: int) -> list[str]:
        """Volcano's `GetCandidateDomains` (`actions/utils/util.go`), for gang-aware eviction: the HyperNodes where
        room could be made for `job`, from the network-topology-aware plugin's gradients with the eviction purpose
        (widest tier first, capped at its `hypernode.gradient.evict.max-hypernodes`), flattened without repeats
        and cut at `max_domains` (≤ 0: no cut). A job without a hard topology falls back to the cluster-top root
        when no HyperNode qualifies; one with a hard topology gets none."""
        root = self.topology.root
        seen: dict[str, None] = {}
        for gradient in self.hypernode_gradients_for_job(job, root, PURPOSE_EVICT):
            for name in gradient:
                seen.setdefault(name)
                if 0 < max_domains <= len(seen):
                    return list(seen)
        hard = (job.topology is not None and job.topology.hard_tier() is not None) or any(
            s.hard_tier() is not None for s in (job.subjobs or {}).values())
        return list(seen) or ([] if hard else [root])

    def _occupy(self, task: Task, node: Node, sign: int) -> None:
        if sign > 0:
            self.arrays.used[node.idx] += task.resreq
        else:
            self.arrays.used[node.idx] -= task.resreq
        self.placement.touch(node.idx)
        if sign > 0:
            node.tasks[task.uid] = task
            if task.host_ports:
                node.used_ports.update(task.host_ports)
        else:
            node.tasks.pop(task.uid, None)
            node.used_ports.difference_update(task.host_ports)

    # ---- primitive moves: for Statement only, which records each with its inverse ------------------------------
    def _set_status(self, task: Task, status: TaskStatus) -> None:
        self.jobs[task.job].set_status(task, status)

    def _place(self, task: Task, node: Node, status: TaskStatus) -> None:
        """Pending → Allocated/Pipelined on `node`."""
        # `_occupy`, `set_status` and `fire_allocate` inlined: this runs once per placement.
        # `row += resreq` on the row's view adds in place; `used[i] += resreq` would also copy the row back.
        task.node = node.name
        arrays = self.arrays
        row = arrays.pipelined_rows[node.idx] if status is TaskStatus.PIPELINED else arrays.used_rows[node.idx]
        row += task.resreq
        self.placement.touch(node.idx)
        node.tasks[task.uid] = task
        if task.host_ports:
            node.used_ports.update(task.host_ports)
        self.jobs[task.job].set_status(task, status)
        for allocate in self._on_allocate:
            allocate(task)

    def _unplace(self, task: Task) -> None:
        """Undo `place`: back to Pending."""
        node = self.node_by_name[task.node or ""]
        if task.status is TaskStatus.PIPELINED:
            self.arrays.pipelined[node.idx] -= task.resreq
            self.placement.touch(node.idx)
            node.tasks.pop(task.uid, None)
            node.used_ports.difference_update(task.host_ports)
        else:
            self._occupy(task, node, -1)
        self._set_status(task, TaskStatus.PENDING)
        self.fire_deallocate(task)  # handlers still see the node it leaves, as in Volcano's `unallocate`
        task.node = None
        task.job_hypernode = ""

    def _release(self, task: Task) -> TaskStatus:
        """A running/bound task starts releasing (eviction); returns the previous status."""
        node = self.node_by_name[task.node or ""]
        previous = task.status
        self.arrays.releasing[node.idx] += task.resreq
        self.placement.touch(node.idx)
        self._set_status(task, TaskStatus.RELEASING)
        self.fire_deallocate(task)
        return previous

    def _unrelease(self, task: Task, previous: TaskStatus) -> None:
        node = self.node_by_name[task.node or ""]
        self.arrays.releasing[node.idx] -= task.resreq
        self.placement.touch(node.idx)
        self._set_status(task, previous)
        self.fire_allocate(task)

    # ---- placement (extender/engine/placement.py) -------------------------------------------------------------
    def feasible(self, task: Task) -> tuple[Mask, Mask]:
        """(fits FutureIdle and passes predicates, fits Idle) over all nodes."""
        return self.placement.feasible(task)

    def best_node(self, task: Task, candidates: Mask) -> Node:
        """The highest-scoring node among `candidates`; ties go to the lowest node name."""
        return self.placement.best_node(task, candidates)

    def choose(self, task: Task) -> tuple[Node, bool] | None:
        """The best node with idle room (True: allocate there), else the best node whose room is being released
        (False: pipeline there), else None."""
        return self.placement.choose(task)

    def scores(self, task: Task, idx: Index) -> Scores:
        return self.placement.scores(task, idx)

    def preempt_mask(self, task: Task) -> Mask:
        """Nodes where evicting pods might let the task in, so preempt and reclaim look for victims only there
        (Volcano's `PredicateForPreemptAction`): the static predicates (selector, affinity, taints, unschedulable)
        accept it and no predicate refuses it UnschedulableAndUnresolvable (required pod affinity, a missing spread
        key)."""
        return self.placement.preempt_mask(task).copy()

    def predicate_node(self, task: Task, node: Node) -> bool:
        """Plugin predicates only (no resource fit), for one node."""
        return self.placement.predicate_node(task, node)

    def predicate_reasons(self, task: Task, node: Node) -> list[str]:
        """Why the plugin predicates refuse `task` on `node`, in their words (empty when they accept it)."""
        return self.placement.predicate_reasons(task, node)

    def local_summary(self, task: Task) -> str:
        """What comes closest when no node the static predicates accept admits `task` by its local state (vGPU
        cards); "" when one does."""
        rows = np.flatnonzero(self.placement.static_mask(task))
        return "; ".join(s for local in self.node_locals.all() if local.applies(task)
                         if (s := local.summary(task, rows)))

    def fit_error(self, task: Task, rows: Index | None = None, hypernode: str = "") -> Status:
        """Why no node accepts `task`: Volcano's FitErrors text (`0/N nodes are unavailable: 3 Insufficient
        cpu.`), UnschedulableAndUnresolvable when no eviction could open any node (`preempt_mask`); over
        the nodes `rows` of HyperNode `hypernode` only, when given."""
        return self.placement.fit_error(task, rows, hypernode)

    # ---- helpers for actions --------------------------------------------------------------------------------
    @property
    def device_configs(self) -> Mapping[str, DeviceConfig]:
        """vGPU device configs of the snapshot, by "namespace/name" of their ConfigMap."""
        return self._device_configs

    def queue_of(self, job: Job) -> Queue:
        return self.queues[job.queue]

    def job_of(self, task: Task) -> Job:
        return self.jobs[task.job]

    def allocated_tasks(self, job: Job) -> Iterable[Task]:
        return (t for t in job.tasks.values() if t.status in ALLOCATED_STATUS)

    def record_event(self, key: str, type_: str, reason: str, message: str) -> None:
        """An event for PodGroup `key` (the service decides when it is written)."""
        self.records.events.append(PodGroupEvent(key, type_, reason, message))

    def job_status(self, job: Job) -> Status:
        """Why a job that is not ready got no place this session: Unschedulable unless every task that found no
        node was refused on every node by what no eviction fixes (then preemption cannot help: unresolvable)."""
        # From the job's map rather than by walking its tasks (most found no error): only `all` reads them, so the
        # order does not matter.
        errors = [e for uid, e in job.fit_errors.items() if uid in job.tasks]
        unresolvable = bool(errors) and all(e.unresolvable for e in errors)
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return Status(code, self.job_fit_error(job))

    def set_condition(self, job: Job, kind: str, reason: str, message: str) -> None:
        """Record this session's PodGroup condition (`Unschedulable` or `Scheduled`) for `job`."""
        self.conditions[job.uid] = (kind, reason, message)

    def job_fit_error(self, job: Job) -> str:
        """Volcano's `JobInfo.FitError`: a histogram of task statuses, then why pending tasks did not fit. Once the
        session closes nothing moves any more, so the text is made once per job (gang's condition and the
        PodGroup's status both read it)."""
        closed = self._fit_texts
        if closed is not None:
            text = closed.get(job.uid)
            if text is None:
                text = closed[job.uid] = self._job_fit_error(job)
            return text
        return self._job_fit_error(job)

    def _job_fit_error(self, job: Job) -> str:
        statuses: dict[str, int] = {"minAvailable": job.min_member}
        for status in TASK_STATUSES:  # the job's counters are its tasks' statuses counted (the text sorts them)
            if job.counts[status]:
                statuses[status.label()] = job.counts[status]
        text = "pod group is not ready, " + ", ".join(sorted(f"{n} {s}" for s, n in statuses.items()))
        if job.job_fit_error:
            return f"{text}; {job.job_fit_error}"
        pending = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING]
        if pending:
            text += f"; Pending: {len(pending)} Unschedulable"
            errors = dict.fromkeys(job.fit_errors[t.uid].message for t in pending if t.uid in job.fit_errors)
            if errors:
                text += " (" + " ".join(errors) + ")"
        return text

    def trial(self) -> Trial:
        """A Statement for placements to count and undo: its caller (explain) sees only allocate, pipeline and
        discard, so it is always discarded and changes nothing the session decides."""
        return self._statements(self)

    def close(self) -> None:
        self._fit_texts = {}
        for _, _, plugin in self.plugins:
            plugin.on_session_close(self)

    def release(self) -> None:
        """Drop everything the session holds, once its decisions are made and nothing reads it any more.

        The plugins' callbacks refer back to the session, so a finished session (a few objects per pod) is one
        reference cycle that only the cyclic collector frees, after walking all of it (~0.06 s at 50,000 pods,
        and again when the garbage is found); released, reference counting frees it at once."""
        self.placement.release()
        vars(self).clear()


__all__ = ["EvictionNote", "Index", "Mask", "PodGroupEvent", "QueueReport", "Scores", "Session", "SessionRecords"]
