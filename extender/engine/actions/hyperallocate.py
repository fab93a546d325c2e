"""allocate for a job with a hard network topology or sub-gangs: each gang inside one HyperNode (Volcano's
`actions/allocate/allocate.go`: `allocateForJob`, `allocateForSubJob`, `allocateResourcesForTasks` over a
HyperNode's nodes, `allocateFromNomination`, and `recorder.go`).

The job's gradients (the plugin's `HyperNodeGradientForJobFn` from the cluster-top root) are tried lowest tier
first; in a gradient each HyperNode is a dry run in which the job's sub-gangs are placed in turn, each by its own
gradients under that HyperNode, each HyperNode of a sub-gang's gradient a dry run of its tasks on that HyperNode's
nodes only; the first gradient where the job becomes ready (or pipelined) wins, with its best HyperNode.

Volcano dry-runs every candidate of a gradient and keeps the best by `HyperNodeOrderFn`; that score does not
depend on the dry run (it reads the HyperNodes' resources as they stand), so here the candidates are tried in score
order and the first that fits wins: the same HyperNode, found after one dry run instead of one per HyperNode. The
score is the HyperNode binpack, then the share of the sub-gang's tasks already in it (Volcano adds that share only
among the candidates tied at the best binpack, which orders them the same way), then the lowest name where Volcano
picks at random. At the job level, where a candidate's score is the sum of its sub-gangs' scores in wherever they
landed below it: a job of one sub-gang (no sub-gang policies) tries its candidates in order of the best score it
could reach in each (the best among the HyperNodes below with room, exact for a leaf) and stops once no remaining
candidate can beat the best found, usually after one dry run; a job of several sub-gangs dry-runs every candidate
(its later sub-gangs are scored after the earlier ones raised the binpack, so nothing bounds a candidate's score
beforehand). A sub-gang that failed in a HyperNode before anything else was
placed in this job's attempt fails there again, and is not tried twice. A HyperNode whose future idle, as the session
stands, is short of what the fewest pods the gang still needs ask (per resource, the smallest requests) cannot hold
it, and is not tried at all: the dry run would fail there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from extender.engine.actions.ordering import PriorityQueue
from extender.engine.interface import PURPOSE_ALLOCATE, Index
from extender.engine.model import ALLOCATED_STATUS, Job, Node, SubJob, Task, TaskStatus
from extender.engine.session import Session
from extender.engine.statement import Statement
from lapilli.resources.vector import TOLERANCE

Placements = list[tuple[Task, Node, bool]]


def needs_hypernodes(job: Job) -> bool:
    """Volcano's `ContainsHardTopology() || ContainsSubJobPolicy()`: allocate goes through `allocate_for_job`."""
    if job.subjobs is None:
        return False
    if job.has_policy or (job.topology is not None and job.topology.hard_tier() is not None):
        return True
    return any(sub.hard_tier() is not None for sub in job.subjobs.values())


def has_topology(job: Job) -> bool:
    """`ContainsNetworkTopology`."""
    return job.subjobs is not None and (job.topology is not None or any(
        s.topology is not None for s in job.subjobs.values()))


@dataclass(slots=True)
class SubSheet:
    """A sub-gang's pending tasks in task order, from `pos` on (Volcano's SubJobWorksheet)."""

    tasks: list[Task]
    pos: int = 0

    def empty(self) -> bool:
        return self.pos >= len(self.tasks)

    def clone(self) -> SubSheet:
        return SubSheet(self.tasks, self.pos)


@dataclass(slots=True)
class JobSheet:
    """The sub-gangs left to place (required ones first: what `minSubGroups` still needs) and their tasks."""

    order: list[SubJob]
    required: set[str]
    sheets: dict[str, SubSheet] = field(default_factory=dict)

    def empty(self) -> bool:
        return not self.order

    def clone(self) -> JobSheet:
        return JobSheet(list(self.order), self.required, {k: v.clone() for k, v in self.sheets.items()})

    def take(self, ssn: Session) -> SubJob:
        """Pop the next sub-gang: required first, then SubJobOrder (which reads readiness now)."""
        best = 0
        for i in range(1, len(self.order)):
            if self._before(ssn, self.order[i], self.order[best]):
                best = i
        return self.order.pop(best)

    def _before(self, ssn: Session, left: SubJob, right: SubJob) -> bool:
        lreq, rreq = left.uid in self.required, right.uid in self.required
        if lreq != rreq:
            return lreq
        return ssn.subjob_order(left, right) < 0


def job_sheet(ssn: Session, job: Job) -> JobSheet:
    """`organizeJobWorksheet`."""
    assert job.subjobs is not None
    ready: dict[str, int] = {}
    waiting: list[SubJob] = []
    for sub in sorted(job.subjobs.values(), key=lambda s: s.uid):
        if ssn.subjob_ready(job, sub):
            ready[sub.gid] = ready.get(sub.gid, 0) + 1
        else:
            waiting.append(sub)
    required: set[str] = set()
    for sub in sorted(waiting, key=_SubOrder(ssn)):
        if ready.get(sub.gid, 0) < job.min_subjobs.get(sub.gid, 0):
            required.add(sub.uid)
            ready[sub.gid] = ready.get(sub.gid, 0) + 1
    sheet = JobSheet([], required)
    for sub in sorted(job.subjobs.values(), key=lambda s: s.uid):
        todo = [t for t in sub.pending_tasks() if not t.best_effort]
        if todo:
            key = ssn.task_key(todo)
            if key is not None:  # keys end in the uid: sorting by them is the queue's pop order
                todo.sort(key=key)
            else:
                queue = PriorityQueue(ssn.task_order, todo)
                todo = [queue.pop() for _ in range(len(queue))]
            sheet.sheets[sub.uid] = SubSheet(todo)
            sheet.order.append(sub)
    return sheet


class _SubOrder:
    """A sort key from the session's SubJobOrder comparator."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn

    def __call__(self, sub: SubJob) -> _Ranked:
        return _Ranked(sub, self.ssn)


class _Ranked:
    __slots__ = ("ssn", "sub")

    def __init__(self, sub: SubJob, ssn: Session) -> None:
        self.sub, self.ssn = sub, ssn

    def __lt__(self, other: _Ranked) -> bool:
        return self.ssn.subjob_order(self.sub, other.sub) < 0


def need_continue(job: Job, sub: SubJob) -> bool:
    """`NeedContinueAllocating(subJob)`: may the sub-gang's allocation go on after a task found no node?"""
    if job.min_member == len(job.tasks) or sub.min_available >= len(sub.tasks):
        return False
    if job.has_policy:
        return True
    failed = {job.tasks[uid].role for uid in job.fit_errors if uid in job.tasks}
    pending: dict[str, int] = {}
    for task in job.pending_tasks():
        pending[task.role] = pending.get(task.role, 0) + 1
    if job.min_member < job.task_min_sum():
        return job.ready_num() + sum(n for r, n in pending.items() if r not in failed) >= job.min_member
    for role in failed:
        need = job.min_task_member.get(role, 0)
        if need and job.role_count(role, ALLOCATED_STATUS) < need:
            return False
    return True


@dataclass(slots=True)
class _Found:
    hypernode: str
    score: float
    placements: Placements  # filled when `live` is undone, for a replay
    sheet: JobSheet
    decisions: dict[str, str]  # sub-gang -> its new allocated HyperNode
    live: Statement | None = None  # kept applied (no replay needed) when no other candidate can win


class HyperAllocator:
    """One allocate action's placements of jobs that need HyperNodes."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.sheets: dict[str, JobSheet] = {}

    def sheet(self, job: Job) -> JobSheet:
        if job.uid not in self.sheets:
            self.sheets[job.uid] = job_sheet(self.ssn, job)
        return self.sheets[job.uid]

    # ---- job ---------------------------------------------------------------------------------------------------
    def allocate_job(self, job: Job) -> Statement | None:
        """`allocateForJob`: the placement of the job's sub-gangs inside the best HyperNode of its first gradient
        that fits, applied (not committed); None when no gradient fits."""
        ssn, sheet = self.ssn, self.sheet(job)
        if sheet.empty():
            return None
        root = ssn.topology.root
        failed: set[tuple[str, str]] = set()
        for gradient in ssn.hypernode_gradients_for_job(job, root, PURPOSE_ALLOCATE):
            found = self._best_in(job, sheet, gradient, failed)
            if found is None:
                continue
            stmt = found.live
            if stmt is None:
                stmt = Statement(ssn)
                stmt.replay(found.placements)
            self._apply(job, sheet, found)
            return stmt
        return None

    def _best_in(self, job: Job, sheet: JobSheet, gradient: list[str], failed: set[tuple[str, str]]) -> _Found | None:
        pending = [t for sub in sheet.order for t in sheet.sheets[sub.uid].tasks[sheet.sheets[sub.uid].pos:]]
        candidates = self._with_room(self.ssn.topology.indices(gradient), pending, self._needed(job, None))
        if not len(candidates):
            return None
        order, bounds = self._job_bounds(job, sheet, candidates)  # best bound first, then the lowest name
        names = self.ssn.topology.index.names
        best: _Found | None = None
        for k, at in enumerate(order):
            name, bound = names[at], bounds[k]
            if best is not None and (bound < best.score or (bound == best.score and name > best.hypernode)):
                break
            found = self._try_job_in(job, sheet, name, failed)
            if found is None:
                continue
            if best is not None and (found.score < best.score or (found.score == best.score and name > best.hypernode)):
                assert found.live is not None
                found.live.discard()
                continue
            best = found
            if k + 1 == len(order) or bounds[k + 1] < best.score or (
                    bounds[k + 1] == best.score and names[order[k + 1]] > name):
                return best  # nothing left can beat it: its placements stay applied
            assert found.live is not None
            found.placements = found.live.placements()  # to replay should it stay the best
            found.live.discard()
            found.live = None
        return best

    def _job_bounds(self, job: Job, sheet: JobSheet, candidates: Index) -> tuple[list[int], list[float]]:
        """The candidates (HyperNode indices) by the best score the job could reach in each, best first, then by
        name; and those scores.

        One sub-gang (a job without sub-gang policies), placed first, sees the session as it stands now: its score
        in a candidate is that of the HyperNode it lands in among the first of its gradients under the candidate
        with room, at most the best score over those gradients (exact in a leaf, which is its own gradient). With
        several sub-gangs the later ones are scored after the earlier ones took room, which raises the HyperNode
        binpack: no bound holds, so every candidate is tried (as Volcano does)."""
        ssn = self.ssn
        topo = ssn.topology
        if len(sheet.order) != 1:
            bounds = np.full(len(candidates), np.inf)
        elif np.logical_and.reduce(topo.index.childless[candidates]):  # leaves: each candidate is all it can reach
            bounds = ssn.hypernode_score_array(sheet.order[0], candidates)
        else:
            sub = sheet.order[0]
            sub_sheet = sheet.sheets[sub.uid]
            tasks, needed = sub_sheet.tasks[sub_sheet.pos:], self._needed(job, sub)
            reach = []
            for at in candidates.tolist():
                best = 0.0
                for below in ssn.hypernode_gradients_for_subjob(sub, topo.index.names[at], PURPOSE_ALLOCATE):
                    room = self._with_room(topo.indices(below), tasks, needed)
                    if len(room):
                        best = max(best, float(ssn.hypernode_score_array(sub, room).max()))
                reach.append(best)
            bounds = np.array(reach)
        order = np.lexsort((topo.index.rank[candidates], -bounds))
        return candidates[order].tolist(), bounds[order].tolist()

    def _try_job_in(self, job: Job, sheet: JobSheet, hypernode: str, failed: set[tuple[str, str]]) -> _Found | None:
        """One dry run of the job in `hypernode`: its sub-gangs in turn; the placements stay applied (in `live`)
        when the job became ready or pipelined, else they are undone and None returned."""
        ssn = self.ssn
        job.fit_errors.clear()
        job.job_fit_error = ""
        copy = sheet.clone()
        held = {sub.uid: sub.allocated_hypernode for sub in copy.order}
        stmt = Statement(ssn)
        score, decisions = 0.0, {}
        while not copy.empty():
            sub = copy.take(ssn)
            sub_sheet = copy.sheets[sub.uid]
            placed = self._allocate_subjob(job, sub, sub_sheet, hypernode, failed if stmt.empty() else None)
            if placed is None:
                continue
            sub_stmt, sub_score, decision = placed
            stmt.merge(sub_stmt)
            score += sub_score
            decisions[sub.uid] = decision
            if not sub_sheet.empty():
                copy.order.append(sub)
            if ssn.job_ready(job):
                break
        for sub in sheet.order:  # RecoverSubJobStatus: the decisions are applied once the job commits
            sub.allocated_hypernode = held.get(sub.uid, sub.allocated_hypernode)
        if not stmt.empty() and (ssn.job_ready(job) or ssn.job_pipelined(job)):
            return _Found(hypernode, score, [], copy, decisions, stmt)
        stmt.discard()
        return None

    def _apply(self, job: Job, sheet: JobSheet, found: _Found) -> None:
        """`ShallowCopyFrom` + `UpdateDecisionToJob`: the remaining work and the HyperNodes now held."""
        sheet.order, sheet.sheets = found.sheet.order, found.sheet.sheets
        topo = self.ssn.topology
        job.allocated_hypernode = topo.lca(job.allocated_hypernode, found.hypernode)
        assert job.subjobs is not None
        for uid, decided in found.decisions.items():
            sub = job.subjobs[uid]
            sub.allocated_hypernode = topo.lca(sub.allocated_hypernode, decided)
            if sub.nominated_hypernode:
                self.ssn.nominate(job, sub.uid, "")

    # ---- sub-gang ----------------------------------------------------------------------------------------------
    def _allocate_subjob(self, job: Job, sub: SubJob, sheet: SubSheet, within: str,
                         failed: set[tuple[str, str]] | None) -> tuple[Statement, float, str] | None:
        """`allocateForSubJob`: the sub-gang placed in the best HyperNode of its first gradient under `within`
        that fits; (statement, score, its new allocated HyperNode), the sheet advanced past what was placed."""
        ssn = self.ssn
        if sheet.empty():
            return None
        if sub.nominated_hypernode:
            nominated = allocate_from_nomination(ssn, job, sub, sheet)
            if nominated is not None:
                return nominated, 0.0, sub.allocated_hypernode
        topo = ssn.topology
        for gradient in ssn.hypernode_gradients_for_subjob(sub, within, PURPOSE_ALLOCATE):
            candidates = topo.indices(gradient)
            if gradient != [within] or job.has_policy:  # the job's own sub-gang in `within`: checked just now
                candidates = self._with_room(candidates, sheet.tasks[sheet.pos:], self._needed(job, sub))
            if not len(candidates):
                continue
            scores = ssn.hypernode_score_array(sub, candidates)
            if len(candidates) > 1:  # best score first, then the lowest name
                order = np.lexsort((topo.index.rank[candidates], -scores))
                candidates, scores = candidates[order], scores[order]
            for at, score in zip(candidates.tolist(), scores.tolist(), strict=True):
                name = topo.index.names[at]
                if failed is not None and (sub.uid, name) in failed:
                    continue
                for uid in [u for u in job.fit_errors if job.subjob_of.get(u) is sub]:
                    del job.fit_errors[uid]  # ResetSubJobFitErr
                copy = sheet.clone()
                stmt = self.allocate_tasks(job, sub, copy, name)
                if stmt is None or stmt.empty():  # placing nothing is no solution, even for a ready sub-gang
                    if failed is not None:
                        failed.add((sub.uid, name))
                    continue
                sheet.pos = copy.pos
                sub.allocated_hypernode = topo.lca(sub.allocated_hypernode, name)
                return stmt, score, sub.allocated_hypernode
        return None

    def _needed(self, job: Job, sub: SubJob | None) -> int:
        """The fewest more pods a dry run must place to succeed: what the gang plugin still counts short of ready
        or pipelined (1 — something placed — when no gang plugin votes on it)."""
        ssn = self.ssn
        if ssn.plugin("gang") is None:
            return 1
        if sub is not None and job.has_policy:
            if not (ssn.subjob_readies and ssn.subjob_pipelineds):
                return 1
            held = sub.ready_num() + sub.counts[TaskStatus.PIPELINED] + sub.pending_best_effort
            return max(1, sub.min_available - held)
        if not (ssn.job_readies and ssn.job_pipelineds):
            return 1
        return max(1, job.min_member - job.ready_num() - job.waiting_num() - job.pending_best_effort())

    def _with_room(self, hypernodes: Index, tasks: list[Task], needed: int) -> Index:
        """The HyperNodes of `hypernodes` (indices) whose future idle covers the `needed` smallest requests among
        `tasks`."""
        if not len(hypernodes):
            return hypernodes
        free = self.ssn.topology.room()
        if free is None:
            return hypernodes
        if needed > len(tasks):
            return hypernodes[:0]
        first = tasks[0].resreq
        if all(t.resreq is first for t in tasks):  # one pod template: siblings share their request vector
            need = first * needed
        else:
            need = np.sort(np.stack([t.resreq for t in tasks]), axis=0)[:needed].sum(axis=0)
        return hypernodes[np.logical_and.reduce(need < free[hypernodes] + TOLERANCE, axis=1)]

    def allocate_tasks(self, job: Job, sub: SubJob, sheet: SubSheet, hypernode: str) -> Statement | None:
        """`allocateResourcesForTasks` on the nodes of `hypernode`: tasks in order until the sub-gang is ready;
        the statement when it is ready or pipelined, else None (undone)."""
        ssn = self.ssn
        rows = ssn.topology.rows_of(hypernode)
        if not len(rows):
            return None
        queue = ssn.queues[job.queue]
        stmt = Statement(ssn)
        held = sub.allocated_hypernode
        # Inside one lowest-tier HyperNode every node is as close to the gang as any other, and while the sub-gang
        # holds no HyperNode every node scores 0: the node score of the network topology is the same for all of
        # them, so it is not asked (Volcano computes it and it orders nothing).
        scored = not ssn.topology.within_one_leaf(hypernode)
        failed_roles = {job.tasks[u].role for u in job.fit_errors if u in job.tasks and job.subjob_of.get(u) is sub}
        follow = sub.topology is not None and scored
        allocatable, choose_in, subjob_ready = ssn.allocatable, ssn.placement.choose_in, ssn.subjob_ready
        while not sheet.empty():
            task = sheet.tasks[sheet.pos]
            sheet.pos += 1
            if not allocatable(queue, task):
                continue
            if task.role and task.role in failed_roles:
                continue  # a sibling of the same role already found no node here
            if sub.topology is not None:
                task.job_hypernode = held if scored else ""
            nominated = self._nominated(task, rows) if task.nominated_node else None
            choice = nominated or choose_in(task, rows, follow and bool(held))
            if choice is None:
                shown = "" if hypernode == ssn.topology.root else hypernode
                job.fit_errors[task.uid] = ssn.fit_error(task, rows, shown)
                failed_roles.add(task.role)
                if need_continue(job, sub):
                    continue
                break
            node, idle = choice
            if idle:
                stmt.allocate(task, node)
            else:
                stmt.pipeline(task, node)
            if follow:  # getNewAllocatedHyperNode (only the node score reads it)
                lowest = ssn.topology.hypernode_of_row(node.idx)
                held = (lowest if not held else ssn.topology.lca(lowest, held)) if lowest else held
            if subjob_ready(job, sub):
                break
        if ssn.subjob_ready(job, sub) or ssn.subjob_pipelined(job, sub):
            return stmt
        stmt.discard()
        return None

    def _nominated(self, task: Task, rows: Index) -> tuple[Node, bool] | None:
        """The task's `nominatedNodeName` first, when it is among the HyperNode's nodes and fits there."""
        node = self.ssn.node_by_name.get(task.nominated_node or "")
        if node is None or not _contains(rows, node.idx):
            return None
        ok, idle = self.ssn.placement.fits_row(task, node.idx)
        return (node, idle) if ok else None


def _contains(rows: Index, row: int) -> bool:
    """Whether ascending `rows` holds `row`."""
    i = int(np.searchsorted(rows, row))
    return i < len(rows) and int(rows[i]) == row


def allocate_from_nomination(ssn: Session, job: Job, sub: SubJob, sheet: SubSheet) -> Statement | None:
    """`allocateFromNomination`: every pending task of the sub-gang onto its `nominatedNodeName`, which must lie in
    the sub-gang's nominated HyperNode, be allocatable and pass the predicates with room (future idle); on any miss
    the nomination is dropped (with the tasks' nominated nodes) and None returned, for the regular search."""
    pinned = sub.nominated_hypernode
    rows = ssn.topology.rows_of(pinned)
    queue = ssn.queues[job.queue]
    plan: list[tuple[Task, Node]] = []
    for task in sheet.tasks[sheet.pos:]:
        node = ssn.node_by_name.get(task.nominated_node or "")
        usable = node is not None and _contains(rows, node.idx) and ssn.allocatable(queue, task)
        if node is None or not usable or not ssn.placement.fits_row(task, node.idx)[0]:
            invalidate_nomination(ssn, job, sub, sheet)
            return None
        plan.append((task, node))
    if not plan:
        invalidate_nomination(ssn, job, sub, sheet)
        return None
    stmt = Statement(ssn)
    for task, node in plan:
        if sub.topology is not None:
            task.job_hypernode = pinned
        ok, idle = ssn.placement.fits_row(task, node.idx)
        if idle:
            stmt.allocate(task, node)
        elif ok:
            stmt.pipeline(task, node)
    sheet.pos = len(sheet.tasks)
    sub.allocated_hypernode = ssn.topology.lca(sub.allocated_hypernode, pinned)
    return stmt


def invalidate_nomination(ssn: Session, job: Job, sub: SubJob, sheet: SubSheet) -> None:
    """`invalidateSubJobNomination`: the sub-gang's nomination and its pending tasks' nominated nodes go."""
    ssn.nominate(job, sub.uid, "")
    for task in sheet.tasks[sheet.pos:]:
        task.nominated_node = None


__all__ = [
    "HyperAllocator",
    "JobSheet",
    "SubSheet",
    "allocate_from_nomination",
    "has_topology",
    "invalidate_nomination",
    "job_sheet",
    "need_continue",
    "needs_hypernodes",
]
