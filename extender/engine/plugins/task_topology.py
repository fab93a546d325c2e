"""task-topology: keep the tasks of a job that exchange data together (Volcano's `plugins/task-topology`).

A job opts in with PodGroup annotations (the Job's, which its PodGroup inherits):
`volcano.sh/task-topology-affinity: "ps,worker"` (roles that should share a node; `;` separates groups, a group of
one role means its replicas attract each other), `volcano.sh/task-topology-anti-affinity: "ps"` (roles that should
not) and `volcano.sh/task-topology-task-order: "ps,worker"` (which role to place first). A role is a pod's
`volcano.sh/task-spec`; an annotation naming a role the job does not have, or one role twice, leaves the job out.

At session open every such job's tasks are dealt into *buckets*: tasks already on a node form that node's bucket;
pending tasks go, in task order, to the bucket they have the most affinity with (ties: the bucket requesting
less), or to a new bucket when every bucket repels them. TaskOrder puts tasks in buckets first, bigger buckets
first, then older buckets, and inside a bucket the user's order then the strongest topology. NodeOrder scores a
node for a task by how much of its bucket is (or could still be) there: tasks of the bucket already on the node,
minus anti-affine tasks placed there this session, plus the bucket's pending tasks that would still fit, scaled
to 0–100 by the largest bucket and multiplied by `task-topology.weight` (default 1). With binpack this packs a
ps/worker job onto as few nodes as fit it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from extender.engine.arguments import Arguments, ConfError, integer
from extender.engine.interface import EventHandler, Index, Scores, SessionView
from extender.engine.model import Job, Task
from extender.engine.registry import register_plugin
from extender.engine.rowmath import NodeRows, Num, Ops
from lapilli.resources.vector import TOLERANCE, Vec

AFFINITY: Final = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY: Final = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER: Final = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE: Final = 100.0

# Volcano's priority of each kind of topology a role takes part in (the larger, the earlier it is placed).
SELF_ANTI, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI = 4, 3, 2, 1


@dataclass(frozen=True, slots=True)
class TopologyArgs:
    weight: int = 1


def parse_arguments(arguments: Arguments) -> TopologyArgs:
    weight = integer(arguments, "task-topology.weight", 1)
    if weight < 0:
        raise ConfError(f"argument task-topology.weight: {weight} must not be negative")
    return TopologyArgs(weight=weight)


@dataclass(slots=True)
class Topology:
    """One job's annotations as relations between role names."""

    affinity: list[list[str]] = field(default_factory=list)
    anti_affinity: list[list[str]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)


def _groups(text: str) -> list[list[str]]:
    return [part.split(",") for part in text.split(";")]


class TopologyError(ValueError):
    """Annotations naming a role the job does not have, or one role twice in a group (Volcano's message)."""


def _check(job: Job, groups: list[list[str]]) -> None:
    roles = {t.role for t in job.tasks.values()}
    for group in groups:
        seen: set[str] = set()
        for role in group:
            if not role:
                continue
            if role not in roles:
                raise TopologyError(f"task {role} do not exist in job <{job.namespace}/{job.name}>")
            if role in seen:
                raise TopologyError(f"task {role} is duplicate in job <{job.namespace}/{job.name}>")
            seen.add(role)


def read_topology(job: Job) -> Topology | None:
    """The job's topology (None when it has no such annotation); `TopologyError` when an annotation names roles
    the job does not have (the plugin then leaves the job alone, as Volcano logs and skips it)."""
    annotations = job.annotations
    if not any(key in annotations for key in (AFFINITY, ANTI_AFFINITY, TASK_ORDER)):
        return None
    topo = Topology()
    if AFFINITY in annotations:
        topo.affinity = _groups(annotations[AFFINITY])
        _check(job, topo.affinity)
    if ANTI_AFFINITY in annotations:
        topo.anti_affinity = _groups(annotations[ANTI_AFFINITY])
        _check(job, topo.anti_affinity)
    if TASK_ORDER in annotations:
        topo.order = annotations[TASK_ORDER].split(",")
        _check(job, [topo.order])
    return topo


@dataclass(slots=True, eq=False)
class Bucket:
    index: int
    pending: dict[str, Task] = field(default_factory=dict)  # by uid, in the order they joined
    roles: dict[str, int] = field(default_factory=dict)  # role -> tasks of the bucket (placed or not)
    request: Vec | None = None  # Σ requests of the pending tasks
    weight: float = 0.0  # Volcano's reqScore: 1 CPU, 1 GPU and 1 Gi weigh the same
    on_node: dict[str, int] = field(default_factory=dict)  # node -> tasks of the bucket placed there
    placed: int = 0

    def add(self, task: Task, weight: float) -> None:
        self.roles[task.role] = self.roles.get(task.role, 0) + 1
        if task.node is not None:
            self.on_node[task.node] = self.on_node.get(task.node, 0) + 1
            self.placed += 1
            return
        self.pending[task.uid] = task
        self.request = task.resreq.copy() if self.request is None else self.request + task.resreq
        self.weight += weight


class JobManager:
    """Volcano's JobManager: one job's relations, buckets and the roles placed on each node this session."""

    def __init__(self, job: Job, topo: Topology, request_weight: Vec) -> None:
        self.job = job
        self.request_weight = request_weight
        self.inter_affinity: dict[str, set[str]] = {}
        self.self_affinity: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self.role_priority: dict[str, int] = {}
        self.role_order: dict[str, int] = {role: len(topo.order) - i for i, role in enumerate(topo.order)}
        self._relations(topo.affinity, self.self_affinity, self.inter_affinity, SELF_AFFINITY, INTER_AFFINITY)
        self._relations(topo.anti_affinity, self.self_anti, self.inter_anti, SELF_ANTI, INTER_ANTI)
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[str, Bucket] = {}  # task uid -> bucket
        self.max_size = 0
        self.node_roles: dict[str, dict[str, int]] = {}  # node -> role -> tasks placed there this session
        self._build()

    def _relations(
        self, groups: list[list[str]], single: set[str], inter: dict[str, set[str]], own: int, mutual: int
    ) -> None:
        for group in groups:
            if len(group) == 1:
                single.add(group[0])
                self._mark(group[0], own)
                continue
            for i, src in enumerate(group):
                for dst in group[:i]:
                    inter.setdefault(src, set()).add(dst)
                    inter.setdefault(dst, set()).add(src)
                self._mark(src, mutual)

    def _mark(self, role: str, priority: int) -> None:
        self.role_priority[role] = max(priority, self.role_priority.get(role, 0))

    def role_compare(self, left: str, right: str) -> int:
        """Volcano's taskAffinityOrder: > 0 when `left` comes first (user order, then topology priority)."""
        if left == right:
            return 0
        lo, ro = self.role_order.get(left, 0), self.role_order.get(right, 0)
        if lo != ro:
            return 1 if lo > ro else -1
        lp, rp = self.role_priority.get(left, 0), self.role_priority.get(right, 0)
        if lp != rp:
            return 1 if lp > rp else -1
        return 0

    def affinity_with(self, role: str, roles: Mapping[str, int], only_anti: bool) -> int:
        """Volcano's checkTaskSetAffinity: + tasks `role` is drawn to, − tasks it repels (only the − part when
        `only_anti`)."""
        score = 0
        if not role:
            return score
        for other, count in roles.items():
            same = other == role
            if not only_anti and (role in self.self_affinity if same else other in self.inter_affinity.get(role, ())):
                score += count
            if role in self.self_anti if same else other in self.inter_anti.get(role, ()):
                score -= count
        return score

    def _build(self) -> None:
        tasks = [t for t in self.job.tasks.values() if t.role and t.role in self.role_priority]
        placed = sorted((t for t in tasks if t.node is not None), key=lambda t: (t.node or "", t.uid))
        pending = [t for t in tasks if t.node is None]
        # Earliest first: the user's order, then the strongest topology, then the name (Volcano sorts in reverse).
        pending.sort(key=lambda t: t.name)
        pending.sort(key=lambda t: (-self.role_order.get(t.role, 0), -self.role_priority.get(t.role, 0)))
        by_node: dict[str, Bucket] = {}
        for task in placed + pending:
            chosen: Bucket | None = None
            best = -(2**31)
            if task.node is not None:
                best, chosen = 0, by_node.get(task.node)
            else:
                for bucket in self.buckets:
                    score = self.affinity_with(task.role, bucket.roles, only_anti=False)
                    if score > best or (score == best and chosen is not None and bucket.weight < chosen.weight):
                        best, chosen = score, bucket
            if best < 0 or chosen is None:
                chosen = Bucket(len(self.buckets))
                self.buckets.append(chosen)
                if task.node is not None:
                    by_node[task.node] = chosen
            chosen.add(task, float(task.resreq @ self.request_weight))
            self.bucket_of[task.uid] = chosen
            self.max_size = max(self.max_size, len(chosen.pending) + chosen.placed)

    def placed(self, task: Task, sign: int) -> None:
        """A task of the job was placed on (sign 1) or taken back from (sign −1) `task.node` in this session."""
        if task.node is None:
            return
        roles = self.node_roles.setdefault(task.node, {})
        roles[task.role] = roles.get(task.role, 0) + sign
        bucket = self.bucket_of.get(task.uid)
        if bucket is None:
            return
        bucket.on_node[task.node] = bucket.on_node.get(task.node, 0) + sign
        bucket.placed += sign
        weight = float(task.resreq @ self.request_weight)
        if sign > 0:
            bucket.pending.pop(task.uid, None)
            bucket.request = None if bucket.request is None else bucket.request - task.resreq
            bucket.weight -= weight
        else:
            bucket.pending[task.uid] = task
            bucket.request = task.resreq.copy() if bucket.request is None else bucket.request + task.resreq
            bucket.weight += weight


class TaskTopologyPlugin:
    name = "task-topology"

    def __init__(self, args: TopologyArgs) -> None:
        self.weight = args.weight
        self.managers: dict[str, JobManager] = {}
        self.ssn: SessionView | None = None

    def on_session_open(self, ssn: SessionView) -> None:
        self.ssn = ssn
        weight = ssn.dims.zeros()
        for name, per_unit in (("cpu", 1.0), ("memory", 1.0 / (1024 * 1024))):
            if name in ssn.dims.index:
                weight[ssn.dims.index[name]] = per_unit  # 1m CPU weighs as 1Mi memory, as in Volcano
        for name, d in ssn.dims.index.items():
            if name not in ("cpu", "memory", "pods"):
                weight[d] = 1.0
        for uid in sorted(ssn.jobs):
            job = ssn.jobs[uid]
            if not job.pending_tasks():
                continue
            try:
                topo = read_topology(job)
            except TopologyError:
                continue  # Volcano logs it and schedules the job without topology
            if topo is not None:
                manager = self.managers[uid] = JobManager(job, topo, weight)
                for task_uid in manager.bucket_of:
                    # Its score varies by job, not by the task's class: the placement cache must not give it the
                    # fast path a task of the same template built without topology (interface.Scorer).
                    job.tasks[task_uid].rescored = True
        if not self.managers:
            return
        ssn.add_task_order(self.task_order)
        ssn.add_node_order(self)
        ssn.add_event_handler(EventHandler(allocate=self._allocated, deallocate=self._deallocated))

    def on_session_close(self, ssn: SessionView) -> None:
        self.managers = {}
        self.ssn = None

    # ---- events ---------------------------------------------------------------------------------------------
    def _allocated(self, task: Task) -> None:
        manager = self.managers.get(task.job)
        if manager is not None:
            manager.placed(task, 1)

    def _deallocated(self, task: Task) -> None:
        manager = self.managers.get(task.job)
        if manager is not None:
            manager.placed(task, -1)

    # ---- TaskOrder ------------------------------------------------------------------------------------------
    def task_order(self, left: Task, right: Task) -> int:
        """< 0 when `left` goes first. Tasks in a bucket go before tasks in none; inside one job, bigger buckets,
        then older ones, then (same bucket) the user's order and the strongest topology."""
        lm, rm = self.managers.get(left.job), self.managers.get(right.job)
        if lm is None or rm is None:
            return 0
        lb, rb = lm.bucket_of.get(left.uid), rm.bucket_of.get(right.uid)
        if (lb is None) != (rb is None):
            return -1 if lb is not None else 1
        if left.job != right.job or lb is None or rb is None:
            return 0
        if len(lb.pending) != len(rb.pending):
            return -1 if len(lb.pending) > len(rb.pending) else 1
        if lb.index == rb.index:
            return -lm.role_compare(left.role, right.role)
        return -1 if lb.index < rb.index else 1

    # ---- NodeOrder (a Scorer: the score depends on the node's name and this session's placements) -----------
    def row_score(self, task: Task, ops: Ops, rows: NodeRows) -> Num:
        return 0.0

    def normalizes(self, task: Task) -> bool:
        manager = self.managers.get(task.job)
        return manager is not None and task.uid in manager.bucket_of

    def normalized(self, task: Task, idx: Index) -> Scores | None:
        manager = self.managers.get(task.job)
        bucket = manager.bucket_of.get(task.uid) if manager is not None else None
        if manager is None or bucket is None or self.ssn is None:
            return None
        arrays = self.ssn.arrays
        room = arrays.allocatable[idx] - arrays.used[idx] + arrays.releasing[idx]  # Volcano: Idle + Releasing
        scores = np.zeros(len(idx))
        scale = self.weight * (MAX_NODE_SCORE / manager.max_size if manager.max_size else 1.0)
        for k, row in enumerate(idx.tolist()):
            scores[k] = self._bucket_score(manager, bucket, task, self.ssn.nodes[row].name, room[k]) * scale
        return scores

    def _bucket_score(self, manager: JobManager, bucket: Bucket, task: Task, node: str, room: Vec) -> int:
        if bool(np.any(room + TOLERANCE <= task.resreq)):
            return 0  # the task could never fit this node
        score = bucket.on_node.get(node, 0)
        roles = manager.node_roles.get(node)
        if roles:
            repelled = manager.affinity_with(task.role, roles, only_anti=True)
            score += min(repelled, 0)
        score += len(bucket.pending)
        if bucket.request is None or bool(np.all(bucket.request < room + TOLERANCE)):
            return score
        # Take other pending tasks out of the bucket (lowest uid first, where Volcano goes in map order) until what
        # is left fits the node: each costs a point.
        remains = bucket.request.copy()
        for uid in sorted(bucket.pending):
            if uid == task.uid:
                continue
            remains -= bucket.pending[uid].resreq
            score -= 1
            if bool(np.all(remains < room + TOLERANCE)):
                break
        return score


register_plugin("task-topology", parse_arguments, TaskTopologyPlugin)
