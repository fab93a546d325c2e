"""Where a task can go and which node is best: predicates, resource fit and node scores over every node, per task class.

Tasks with the same request vector and pod template (`predicate_key`) form a *class*; their fit masks and row-local
scores depend only on each node's row, so a class keeps them for all nodes and refreshes just the rows that changed
since it last looked (every change appends its row to a log). A refresh of a few rows evaluates the formulas over
Python floats (`rowmath.SCALAR`); a first build or a large refresh runs the same formulas over numpy columns.

A class whose tasks ask for node-local state (vGPU cards: `interface.NodeLocal`, registered by deviceshare) folds
that state's fit and score into the same caches, evaluated row by row with the node's local key in the memo, so a
card-sharing pod takes the same `argmax` path; tasks without such asks never pay for it.

Each class also keeps two *pick arrays*: its score where the task passes the static predicates and fits the
node's future idle (`pick_future`) and, in addition, its idle (`pick_idle`), and -inf elsewhere. Allocate's choice
— the best node with idle room, else the best node whose room is still being released — is then one `argmax`
each; `argmax` returns the first maximum, i.e. the lowest node name, as Volcano's tie-break does. A task whose
predicates depend on other pods (`Task.dynamic`: host ports, pod affinity, topology spread) picks from its class's
arrays with what those predicates refuse taken out. Tasks whose scores depend on more than the node's row
(`Task.rescored`, and classes with scores normalised over the candidate set) take the straightforward path: masks
over all nodes, then the best candidate.

Why a task fits nowhere is `fiterror.FitErrors`, over these masks.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

from extender.engine.fiterror import FitErrors
from extender.engine.interface import Index, Mask, NodeBonus, NodeLocal, Predicate, Scorer, Scores, Status
from extender.engine.model import Node, NodeArrays, Task
from extender.engine.rowmath import SCALAR, VECTOR, Bool, NodeRows, Num, Ops, ScalarRow, VectorRows
from lapilli.resources.vector import TOLERANCE, Dims

NO_NODE: Final = -np.inf
# Refreshing one row over Python floats costs a few µs; one numpy pass costs ~100 µs whatever its size.
SCALAR_REFRESH_MAX: Final = 24
# `slice(None)`: every row at once (the whole-table refresh); a string, as `slice` takes no parameters at runtime.
AllRows: TypeAlias = "slice[None, None, None]"


def fits(ops: Ops, request: list[float], rows: NodeRows) -> tuple[Bool, Bool]:
    """(request ≤ idle, request ≤ future idle) with Volcano's `LessEqual`: every dimension below the row's
    value plus 0.1. Future idle = idle + releasing − pipelined."""
    fit_idle: Bool = True
    fit_future: Bool = True
    for col, want in enumerate(request):
        idle = rows.allocatable[col] - rows.used[col]
        future = idle + rows.releasing[col] - rows.pipelined[col]
        fit_idle = fit_idle & (want < idle + TOLERANCE)
        fit_future = fit_future & (want < future + TOLERANCE)
    return fit_idle, fit_future


@dataclass(slots=True)
class _ClassEntry:
    seen: int  # how much of the change log is reflected here
    request: list[float]
    fast: bool  # the choice depends on node rows only (no normalised scorer)
    static: Mask
    fit_idle: Mask
    fit_future: Mask
    score: Scores
    pick_idle: Scores
    pick_future: Scores
    memo: dict[Hashable, tuple[Bool, Bool, Num]]  # node state → (fit idle, fit future, score)
    local: tuple[NodeLocal, ...] = ()  # node-local filters and scores that apply to this class


class Placement:
    """The session's per-class placement caches. `touch(row)` must follow every change of a node row."""

    def __init__(self, nodes: list[Node], arrays: NodeArrays, dims: Dims) -> None:
        self.nodes = nodes
        self.arrays = arrays
        self.dims = dims
        self._predicates: list[Predicate] = []
        self._scorers: list[Scorer] = []
        self._locals: list[NodeLocal] = []
        self._bonuses: list[NodeBonus] = []
        self._log: list[int] = []
        # `touch(row)` must follow every change of a node row; the log's own `append`, with no Python frame of its
        # own, as it runs on every placement.
        self.touch: Callable[[int], None] = self._log.append
        self._classes: dict[tuple[bytes, str, object], _ClassEntry] = {}
        self._static: dict[str, Mask] = {}
        self.scalar_refresh_max = SCALAR_REFRESH_MAX
        self._last: tuple[npt.NDArray[np.float64], str, object, _ClassEntry] | None = None
        self.fit_errors = FitErrors(self, nodes, arrays, dims)
        self._every: Index = np.arange(len(nodes))

    def plug(self, predicates: list[Predicate], scorers: list[Scorer], locals_: list[NodeLocal] | None = None,
             bonuses: list[NodeBonus] | None = None) -> None:
        """The plugins' predicates, scorers, node-local callbacks and node bonuses, once they have registered."""
        self._predicates, self._scorers, self._locals = predicates, scorers, list(locals_ or ())
        self._bonuses = list(bonuses or ())
        self._classes.clear()
        self._static.clear()
        self.fit_errors.plug(predicates, self._locals)
        self._last = None

    @property
    def changes(self) -> int:
        """How many node rows changed so far."""
        return len(self._log)

    def release(self) -> None:
        """Drop what the placement holds (`Session.release`): it and its fit errors refer to each other."""
        vars(self).clear()

    # ---- caches ---------------------------------------------------------------------------------------------
    def static_mask(self, task: Task) -> Mask:
        """The static predicates' mask for the task's template (shared: callers must not modify it)."""
        mask = self._static.get(task.predicate_key)
        if mask is None:
            idx = np.arange(len(self.nodes))
            mask = np.ones(len(self.nodes), dtype=bool)
            for pred in self._predicates:
                mask &= pred.static_mask(task, idx)
            self._static[task.predicate_key] = mask
        return mask

    def _evaluate(self, task: Task, ops: Ops, rows: NodeRows, request: list[float]) -> tuple[Bool, Bool, Num]:
        fit_idle, fit_future = fits(ops, request, rows)
        score: Num = 0.0
        for scorer in self._scorers:
            score = score + scorer.row_score(task, ops, rows)
        return fit_idle, fit_future, score

    def _store(self, entry: _ClassEntry, idx: Index | AllRows, fit_idle: Bool, fit_future: Bool, score: Num) -> None:
        entry.fit_idle[idx] = fit_idle
        entry.fit_future[idx] = fit_future
        entry.score[idx] = score
        ok = entry.static[idx] & entry.fit_future[idx]
        entry.pick_future[idx] = np.where(ok, entry.score[idx], NO_NODE)
        entry.pick_idle[idx] = np.where(ok & entry.fit_idle[idx], entry.score[idx], NO_NODE)

    def _store_row(self, task: Task, entry: _ClassEntry, row: int) -> None:
        # The formulas see only the row's numbers, so nodes in the same state (one node pool, the same pods) share
        # one evaluation.
        state = self.arrays.state_rows[row]
        key: Hashable = state.tobytes()
        local = entry.local
        if local:
            key = (key, local[0].key(task, row)) if len(local) == 1 else (key, *(n.key(task, row) for n in local))
        values = entry.memo.get(key)
        if values is None:
            rows = ScalarRow(state.tolist(), self.dims.size)
            values = self._evaluate(task, SCALAR, rows, entry.request)
            if entry.local:
                values = _with_local(values, [local.evaluate(task, row) for local in entry.local])
            entry.memo[key] = values
        fit_idle, fit_future, score = values
        entry.fit_idle[row] = fit_idle
        entry.fit_future[row] = fit_future
        entry.score[row] = score
        ok = fit_future and entry.static[row]
        entry.pick_future[row] = score if ok else NO_NODE
        entry.pick_idle[row] = score if ok and fit_idle else NO_NODE

    def _build(self, task: Task) -> _ClassEntry:
        n = len(self.nodes)
        request: list[float] = task.resreq.tolist()
        entry = _ClassEntry(
            seen=len(self._log),
            request=request,
            fast=not any(scorer.normalizes(task) for scorer in self._scorers),
            static=self.static_mask(task),
            fit_idle=np.zeros(n, dtype=bool),
            fit_future=np.zeros(n, dtype=bool),
            score=np.zeros(n),
            pick_idle=np.zeros(n),
            pick_future=np.zeros(n),
            memo={},
            local=tuple(local for local in self._locals if local.applies(task)),
        )
        fit_idle, fit_future, score = self._evaluate(task, VECTOR, VectorRows(self.arrays, None), request)
        if len(entry.local) == 1:
            # The node-local part, evaluated once per distinct local key (equal nodes share it) and added to the
            # row's own score as `_store_row` adds it (one term: the same sum).
            local = entry.local[0]
            found: dict[Hashable, tuple[bool, bool, float]] = {}
            local_now, local_future, local_score = [], [], []
            for row in range(n):
                key = local.key(task, row)
                values = found.get(key)
                if values is None:
                    values = found[key] = local.evaluate(task, row)
                local_now.append(values[0])
                local_future.append(values[1])
                local_score.append(values[2])
            fit_idle = fit_idle & np.array(local_now, dtype=bool)
            fit_future = fit_future & np.array(local_future, dtype=bool)
            score = score + np.array(local_score, dtype=np.float64)
        self._store(entry, slice(None), fit_idle, fit_future, score)
        if len(entry.local) > 1:
            for row in range(n):  # several node-local parts: row by row, summed in `_store_row`'s order
                self._store_row(task, entry, row)
        return entry

    def entry(self, task: Task) -> _ClassEntry:
        """The task's class entry, brought up to date with every row changed since it was last used."""
        last = self._last
        if last is not None and task.resreq is last[0] and task.predicate_key == last[1] and task.device_ask is last[2]:
            entry = last[3]  # the previous task's class: siblings share their request vector (and card ask)
        else:
            key = (task.resreq.tobytes(), task.predicate_key, task.device_ask)
            found = self._classes.get(key)
            if found is None:
                found = self._classes[key] = self._build(task)
            entry = found
            self._last = (task.resreq, task.predicate_key, task.device_ask, entry)
        log = self._log
        if entry.seen < len(log):
            changed = log[entry.seen :]
            entry.seen = len(log)
            if len(changed) == 1:  # the usual case: one placement since this class last looked
                self._store_row(task, entry, changed[0])
            elif len(changed) <= self.scalar_refresh_max:
                for row in dict.fromkeys(changed):
                    self._store_row(task, entry, row)
            else:
                idx = np.unique(np.array(changed, dtype=np.intp))
                rows = VectorRows(self.arrays, idx)
                self._store(entry, idx, *self._evaluate(task, VECTOR, rows, entry.request))
        return entry

    # ---- queries --------------------------------------------------------------------------------------------
    def preempt_mask(self, task: Task) -> Mask:
        """Nodes where evicting pods might let the task in: the static predicates accept it, and no predicate that
        depends on other pods refuses it UnschedulableAndUnresolvable. Shared for a task no such predicate concerns
        (callers must not modify it)."""
        static = self.static_mask(task)
        if not task.dynamic:
            return static
        refused: Mask | None = None
        for pred in self._predicates:
            mask = pred.unresolvable_mask(task, self._every)
            if mask is not None:
                refused = mask if refused is None else refused | mask
        return static if refused is None else static & ~refused

    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None:
        """What the predicates that depend on placed pods allow of the nodes `idx` (None: none constrains it)."""
        combined: Mask | None = None
        for pred in self._predicates:
            mask = pred.dynamic_mask(task, idx)
            if mask is not None:
                combined = mask if combined is None else combined & mask
        return combined

    def feasible(self, task: Task) -> tuple[Mask, Mask]:
        """(fits FutureIdle and passes predicates, fits Idle) over all nodes; the second is the live cache."""
        entry = self.entry(task)
        ok = entry.fit_future & entry.static
        if task.dynamic:
            cand = np.flatnonzero(ok)
            dynamic = self.dynamic_mask(task, cand)
            if dynamic is not None:
                ok[cand] = dynamic
        return ok, entry.fit_idle

    def bonus(self, task: Task) -> Scores | None:
        """The node bonuses' sum for `task` over every node (None when none applies)."""
        total: Scores | None = None
        for fn in self._bonuses:
            extra = fn(task)
            if extra is not None:
                total = extra if total is None else total + extra
        return total

    def scores(self, task: Task, idx: Index) -> Scores:
        """Total scores (row-local, bonuses, and normalised over `idx`) of the nodes `idx`."""
        scores = self.entry(task).score[idx]
        bonus = self.bonus(task) if self._bonuses else None
        if bonus is not None:
            scores = scores + bonus[idx]
        for scorer in self._scorers:
            extra = scorer.normalized(task, idx)
            if extra is not None:
                scores = scores + extra
        return scores

    def best_node(self, task: Task, candidates: Mask) -> Node:
        """The highest-scoring node among `candidates`; ties go to the lowest node name."""
        idx = np.flatnonzero(candidates)
        if len(idx) == 1:
            return self.nodes[int(idx[0])]
        return self.nodes[int(idx[int(np.argmax(self.scores(task, idx)))])]

    def choose(self, task: Task) -> tuple[Node, bool] | None:
        """Allocate's pick: (best node with idle room, True), else (best node that fits future idle, False),
        else None when no node passes the predicates and fits."""
        if not self.nodes:
            return None
        entry = self.entry(task)
        if not entry.fast or task.rescored:
            return self._choose_by_masks(task)
        pick_idle, pick_future = entry.pick_idle, entry.pick_future
        bonus = self.bonus(task) if self._bonuses else None
        if bonus is not None:  # -inf (no room) stays -inf
            pick_idle, pick_future = pick_idle + bonus, pick_future + bonus
        allowed = self.dynamic_mask(task, self._every) if task.dynamic else None
        if allowed is not None:
            # The class's picks with what the dynamic predicates refuse taken out: the same choice as masks, then
            # the best candidate (the class's scores are all there is to its score), for a fraction of the work.
            pick_idle = np.where(allowed, pick_idle, NO_NODE)
        best = int(pick_idle.argmax())
        if pick_idle[best] != NO_NODE:
            return self.nodes[best], True
        if allowed is not None:
            pick_future = np.where(allowed, pick_future, NO_NODE)
        best = int(pick_future.argmax())
        if pick_future[best] != NO_NODE:
            return self.nodes[best], False
        return None

    def choose_in(self, task: Task, rows: Index, rescore: bool = False) -> tuple[Node, bool] | None:
        """`choose` among the nodes `rows` only (ascending: a HyperNode's nodes): allocate's pick when a gang must
        stay inside one HyperNode. Dynamic predicates and normalised scores are evaluated over those rows; a
        rescored task's candidates come from its class's picks (the same nodes the masks give), so scores
        normalised over them are the only extra work. `rescore`: treat the task as rescored for this pick (a gang
        spanning several lowest-tier HyperNodes, whose network-topology node score varies over `rows`)."""
        if not len(rows):
            return None
        entry = self.entry(task)
        allowed = self.dynamic_mask(task, rows) if task.dynamic else None
        if not entry.fast:
            ok = entry.fit_future[rows] & entry.static[rows]
            cand = rows[ok if allowed is None else ok & allowed]
            idle_nodes = cand[entry.fit_idle[cand]]
            if len(idle_nodes):
                return self._best_of(task, idle_nodes), True
            return (self._best_of(task, cand), False) if len(cand) else None
        bonus = self.bonus(task) if self._bonuses else None
        for pick, idle in ((entry.pick_idle, True), (entry.pick_future, False)):
            sub = pick[rows] if bonus is None else pick[rows] + bonus[rows]
            sub = sub if allowed is None else np.where(allowed, sub, NO_NODE)
            if rescore or task.rescored:
                ok = sub != NO_NODE
                if not np.logical_or.reduce(ok):
                    continue
                cand = rows[ok]
                extra = self._normalized(task, cand)
                if extra is not None:
                    return self.nodes[int(cand[int((sub[ok] + extra).argmax())])], idle
            best = int(sub.argmax())
            if sub[best] != NO_NODE:
                return self.nodes[int(rows[best])], idle
        return None

    def _normalized(self, task: Task, idx: Index) -> Scores | None:
        """The scorers' normalised scores over `idx` summed (None when none contributes)."""
        total: Scores | None = None
        for scorer in self._scorers:
            extra = scorer.normalized(task, idx)
            if extra is not None:
                total = extra if total is None else total + extra
        return total

    def _best_of(self, task: Task, idx: Index) -> Node:
        if len(idx) == 1:
            return self.nodes[int(idx[0])]
        return self.nodes[int(idx[int(np.argmax(self.scores(task, idx)))])]

    def fits_row(self, task: Task, row: int) -> tuple[bool, bool]:
        """(passes the predicates and fits future idle, fits idle) on node `row`."""
        entry = self.entry(task)
        ok = bool(entry.static[row] and entry.fit_future[row])
        if ok and task.dynamic:
            dynamic = self.dynamic_mask(task, np.array([row], dtype=np.intp))
            ok = dynamic is None or bool(dynamic[0])
        return ok, ok and bool(entry.fit_idle[row])

    def _choose_by_masks(self, task: Task) -> tuple[Node, bool] | None:
        feasible, fit_idle = self.feasible(task)
        idle_nodes = feasible & fit_idle
        if idle_nodes.any():
            return self.best_node(task, idle_nodes), True
        if feasible.any():
            return self.best_node(task, feasible), False
        return None

    def predicate_node(self, task: Task, node: Node) -> bool:
        """Plugin predicates only (no resource fit), for one node; node-local filters as for a pipelined task
        (room being released counts as free: preempt and reclaim ask before evicting)."""
        dynamic = self.dynamic_mask(task, np.array([node.idx]))
        if not (bool(self.static_mask(task)[node.idx]) and (dynamic is None or bool(dynamic[0]))):
            return False
        return all(local.evaluate(task, node.idx)[1] for local in self._locals if local.applies(task))

    def predicate_reasons(self, task: Task, node: Node) -> list[str]:
        """Why the plugin predicates (and node-local filters) refuse `task` on `node`, in their words (empty when
        they accept it)."""
        reasons = [reason for pred in self._predicates for reason in pred.explain(task, node)]
        return reasons + [r for local in self._locals if local.applies(task) for r in local.explain(task, node)]

    def fit_error(self, task: Task, rows: Index | None = None, hypernode: str = "") -> Status:
        """Volcano's FitErrors text for a task no node accepts (`fiterror.FitErrors`), over the nodes `rows` of
        HyperNode `hypernode` only when given."""
        return self.fit_errors.of(task, rows, hypernode)


def _with_local(values: tuple[Bool, Bool, Num], local: list[tuple[bool, bool, float]]) -> tuple[Bool, Bool, Num]:
    """A row's resource fit and score with the node-local fits and scores folded in."""
    fit_idle, fit_future, score = values
    for now, future, extra in local:
        fit_idle = fit_idle and now
        fit_future = fit_future and future
        score = score + extra
    return fit_idle, fit_future, score


__all__ = ["Index", "Mask", "Placement", "Scores", "fits"]
