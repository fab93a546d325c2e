"""What gangpreempt and gangreclaim share (Volcano's `actions/utils/util.go` and `simulate.go`): their arguments,
the domains they search, the gang's need, the simulated placement and the loop that picks victim bundles.

For a starving gang (the preemptor) the actions search candidate domains in order: `Session.candidate_domains`,
Volcano's `GetCandidateDomains` — HyperNodes from the network-topology-aware plugin's gradients with the eviction
purpose, widest first, at most `maxDomains`; without HyperNodes (or when none qualifies for a job without a hard
topology) the cluster top, every node. In a domain the action-specific `select` gives the victim bundles least
important first (`bundles.py`); they are taken one by one until the domain's future idle room plus what they free
covers the gang's need, and then the gang's whole placement is simulated on that room (Volcano's
`BuildNominationPlanInDomain`): a Statement evicts the victims and pipelines the gang's pending members on the
domain's nodes — a gang with a hard topology or sub-gang policies sub-gang by sub-gang, each in the first HyperNode
of its eviction gradients under the domain where it fits, as allocate places it — and is kept only if the gang is
then pipelined (JobPipelined). A failed simulation is discarded and the next bundle is added; a domain with no
success leaves nothing behind. Once one succeeds, upstream's reprieve gives back every bundle, most important first,
without which the gang still fits, so nothing is evicted beyond what the placement needs. Nothing is evicted at all
when no domain fits the whole gang. Once committed, each sub-gang is nominated to the HyperNode it was placed in
(`Session.nominate`, Volcano's `ApplySubJobNominations`), which allocate honours next; the cluster top is not
nominated (it constrains nothing).

Arguments (`configurations: [{name: gangpreempt|gangreclaim, arguments: {...}}]`), read once when the conf loads:
`maxDomains` (default 8; 0 or less falls back to 8 with a warning, as Volcano) and `allowWholeBundle` (default true;
false: only surplus members are taken, never a whole gang).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.actions.bundles import Bundle, BundleKind, allowed_bundles, job_bundles
from extender.engine.actions.hyperallocate import HyperAllocator, job_sheet, needs_hypernodes
from extender.engine.actions.ordering import PriorityQueue, each_starving
from extender.engine.arguments import Arguments, boolean, integer
from extender.engine.interface import PURPOSE_EVICT, EvictionContext, EvictionKind, Index
from extender.engine.model import Job, Queue, Task, TaskStatus
from extender.engine.session import EvictionNote, Session
from extender.engine.statement import Statement
from lapilli.resources.vector import Vec, less_equal

MAX_DOMAINS: Final = 8


@dataclass(frozen=True, slots=True)
class GangEvictArgs:
    max_domains: int = MAX_DOMAINS
    allow_whole_bundle: bool = True


def parse_arguments(arguments: Arguments, warn: Callable[[str], None]) -> GangEvictArgs:
    max_domains = integer(arguments, "maxDomains", MAX_DOMAINS)
    if max_domains <= 0:
        warn(f"maxDomains {max_domains} is not positive: {MAX_DOMAINS} is used instead (as Volcano does)")
        max_domains = MAX_DOMAINS
    return GangEvictArgs(max_domains, boolean(arguments, "allowWholeBundle", True))


def arguments_of(ssn: Session, action: str) -> GangEvictArgs:
    parsed = ssn.conf.configurations.get(action)
    return parsed if isinstance(parsed, GangEvictArgs) else GangEvictArgs()


@dataclass(frozen=True, slots=True)
class Domain:
    """Where one attempt looks for room: a HyperNode's nodes (the cluster top: every node)."""

    name: str
    rows: Index  # ascending node rows
    mask: npt.NDArray[np.bool_]  # the same, over the session's nodes
    names: frozenset[str]


def domain_of(ssn: Session, name: str) -> Domain:
    rows = ssn.topology.rows_of(name)
    mask = np.zeros(len(ssn.nodes), dtype=bool)
    mask[rows] = True
    return Domain(name, rows, mask, frozenset(ssn.nodes[int(r)].name for r in rows))


def candidate_domains(ssn: Session, job: Job, max_domains: int) -> list[Domain]:
    """The domains to search for `job`, widest first (`Session.candidate_domains`), with their nodes."""
    return [domain_of(ssn, name) for name in ssn.candidate_domains(job, max_domains)]


def pending_members(ssn: Session, job: Job) -> list[Task]:
    """The gang's pending members that need room, in task order (Volcano's eviction worksheet: BestEffort members
    need none, backfill places them)."""
    todo = [t for t in job.pending_tasks() if not t.best_effort]
    tasks = PriorityQueue(ssn.task_order, todo, ssn.task_key(todo))
    return [tasks.pop() for _ in range(len(todo))]


def gang_need(ssn: Session, job: Job, pending: Sequence[Task]) -> Vec:
    """What the gang still needs to start: its first pending members (task order) up to minMember, counting the
    ones placed, pipelined or BestEffort — not its replicas beyond that (Volcano sums every pending member)."""
    short = job.min_member - job.ready_num() - job.waiting_num() - job.pending_best_effort()
    need = ssn.dims.zeros()
    for task in pending[: max(short, 1)]:
        need += task.resreq
    return need


def as_one_request(pending: Sequence[Task], need: Vec) -> Task:
    """The gang as one request (a pending member asking for the whole need): what votes that weigh a reclaimer's
    request (Preemptive, the share plugins' reclaim check) are asked with, as Volcano asks them with the task list."""
    return dataclasses.replace(pending[0], resreq=need)


def future_idle(ssn: Session, domain: Domain) -> Vec:
    rows = ssn.arrays.future_idle()[domain.rows]
    return rows.sum(axis=0) if len(rows) else ssn.dims.zeros()


def victim_members(ssn: Session, job: Job, statuses: frozenset[TaskStatus],
                   gives: Callable[[Job], bool | None]) -> list[tuple[Job, list[Task]]]:
    """The gangs whose pods may go for `job`, each with those pods: preemptable ones in `statuses`. `gives(victim)`
    is None for a gang left out, True when any such pod may go, False when only its idle-reclaimable ones (its
    queue's idle-GPU policy gave their room up: `Task.idle`)."""
    out: list[tuple[Job, list[Task]]] = []
    for victim in sorted(ssn.jobs.values(), key=lambda j: j.uid):
        if victim.uid == job.uid or not victim.gang_evictable:
            continue
        whole = gives(victim)
        if whole is None:
            continue
        members = [t for t in victim.tasks.values() if t.status in statuses and t.preemptable and (whole or t.idle)]
        if members:
            out.append((victim, members))
    return out


# A placement made in a domain: the applied Statement, and the HyperNode each sub-gang went to (its nomination).
Plan = tuple[Statement, dict[str, str]]


def simulate(ssn: Session, queue: Queue, job: Job, pending: Sequence[Task],
             victims: Sequence[tuple[Task, EvictionNote]], domain: Domain) -> Plan | None:
    """Volcano's `BuildNominationPlanInDomain`: evict `victims` and pipeline the gang's pending members in the
    domain, in one Statement. It is returned, still applied, when the gang is then pipelined; otherwise discarded
    (the session is as before)."""
    trial = Statement(ssn)
    for victim, note in victims:
        trial.evict(victim, note)
    if needs_hypernodes(job):
        placed = _place_subgangs(ssn, trial, job, domain)
    else:
        placed = _place_flat(ssn, trial, queue, job, pending, domain)
    if placed is not None and _pipelined(ssn, job):
        return trial, placed
    trial.discard()
    return None


def _place_flat(ssn: Session, trial: Statement, queue: Queue, job: Job, pending: Sequence[Task],
                domain: Domain) -> dict[str, str]:
    """Pending members in task order on the domain's best nodes (idle room first, then room being released; ties to
    the lowest name), pipelined, until the gang is."""
    for task in pending:
        if _pipelined(ssn, job):
            break
        if not ssn.allocatable(queue, task):
            continue
        choice = ssn.placement.choose_in(task, domain.rows)
        if choice is not None:
            trial.pipeline(task, choice[0])
    return {job.uid: domain.name}


def _place_subgangs(ssn: Session, trial: Statement, job: Job, domain: Domain) -> dict[str, str] | None:
    """Volcano's per-sub-job trials: each sub-gang still to place (the ones minSubGroups requires first) in the
    first HyperNode of its eviction gradients under the domain (with a hard topology; else the domain itself) where
    allocate's placement fits it, pipelined; until the gang is pipelined (or, for a gang already ready, one
    sub-gang). None when a sub-gang fits nowhere."""
    hyper, sheet = HyperAllocator(ssn), job_sheet(ssn, job)
    hard = (job.topology is not None and job.topology.hard_tier() is not None) or any(
        s.hard_tier() is not None for s in (job.subjobs or {}).values())
    was_ready = ssn.job_ready(job)
    placed: dict[str, str] = {}
    while not sheet.empty():
        sub = sheet.take(ssn)
        todo = sheet.sheets.get(sub.uid)
        if todo is None or todo.empty():
            continue
        gradients = ssn.hypernode_gradients_for_subjob(sub, domain.name, PURPOSE_EVICT) if hard else [[domain.name]]
        found = next(((stmt, name) for gradient in gradients for name in gradient
                      if (stmt := hyper.allocate_tasks(job, sub, todo.clone(), name)) is not None), None)
        if found is None:
            return None
        stmt, name = found
        moves = stmt.placements()
        stmt.discard()
        trial.replay([(task, node, False) for task, node, _ in moves])  # pipelined: the room is being freed
        placed[sub.uid] = name
        if was_ready or _pipelined(ssn, job):
            break
    return placed


def _pipelined(ssn: Session, job: Job) -> bool:
    # The gang's own count too: a conf without the gang plugin must not make an eviction that places nobody.
    return job.is_pipelined() and ssn.job_pipelined(job)


# The action's victim choice in a domain, given the gang as one request and its need: bundles, least important first.
Select = Callable[[Domain, Task, Vec], list[Bundle]]
Notes = Callable[[Bundle], EvictionNote]


Sort = Callable[[list[Bundle], Vec], list[Bundle]]


def select_bundles(ssn: Session, kind: EvictionKind, job: Job, domain: Domain, actor: Task, need: Vec,
                   victims: Sequence[tuple[Job, list[Task]]], sort: Sort, allow_whole: bool) -> list[Bundle]:
    """The victim bundles in `domain`, least important first (Volcano's `selectDomainBundles`): every victim job's
    bundles from its members the action may take (`victims`), sorted, asked of the plugins' UnifiedEvictable vote
    once over the whole ordered list, rebuilt from what the vote lets go (a whole bundle only if all of it), sorted
    again, and without whole bundles when `allowWholeBundle` is false. Idle-reclaimable members (`Task.idle`) go
    whatever the vote says, as in preempt and reclaim (`victims.with_idle`)."""
    zeros = ssn.dims.zeros()
    raw: list[Bundle] = []
    for victim, members in victims:
        # A member on a node the session does not hold (NotReady, gone) cannot be evicted through it.
        held = [t for t in members if t.node in ssn.node_by_name]
        if held:
            raw.extend(job_bundles(victim, held, domain.names, zeros))
    if not raw:
        return []
    ordered = sort(raw, need)
    ctx = EvictionContext(kind, job, actor, domain.name)
    candidates = [t for b in ordered for t in b.tasks]
    allowed = {t.uid for t in ssn.evictable(ctx, candidates)} | {t.uid for t in candidates if t.idle}
    valid = sort(allowed_bundles(ordered, allowed, zeros, domain.names), need)
    return [b for b in valid if allow_whole or b.kind is BundleKind.SURPLUS]


def _victims(bundles: Sequence[Bundle], note: Notes) -> list[tuple[Task, EvictionNote]]:
    """Each pod once (a gang's whole bundle holds its surplus members too), with its first bundle's note."""
    out: dict[str, tuple[Task, EvictionNote]] = {}
    for bundle in bundles:
        why = note(bundle)
        for task in bundle.tasks:
            out.setdefault(task.uid, (task, why))
    return list(out.values())


def _frees(bundles: Sequence[Bundle], domain: Domain, zeros: Vec) -> Vec:
    """What the bundles' pods free inside the domain, each pod once."""
    total = zeros.copy()
    seen: set[str] = set()
    for bundle in bundles:
        for task in bundle.tasks:
            if task.uid not in seen and task.node in domain.names:
                seen.add(task.uid)
                total += task.resreq
    return total


def _reprieve(plan: Plan, chosen: list[Bundle], attempt: Callable[[list[Bundle]], Plan | None]) -> Plan:
    """Upstream's reprieve: give back each chosen bundle, most important first, if the gang still fits without it.
    `plan` is the applied placement with all of `chosen`; the one returned is applied with what is kept."""
    kept = list(chosen)
    for bundle in reversed(chosen):
        if len(kept) == 1:
            break
        rest = [b for b in kept if b is not bundle]
        plan[0].discard()
        trial = attempt(rest)
        if trial is not None:
            kept, plan = rest, trial
            continue
        again = attempt(kept)
        assert again is not None  # the same placement as before: the session is exactly as it was
        plan = again
    return plan


def evict_for_gang(ssn: Session, stmt: Statement, queue: Queue, job: Job, max_domains: int, select: Select,
                   note: Notes, may: Callable[[Task], bool]) -> dict[str, str] | None:
    """Make room for the whole of `job` in one domain by evicting bundles `select` offers. Once the gang's placement
    is simulated, its evictions and pipelines are in `stmt` and the HyperNode each sub-gang went to is returned
    (None: nothing found). `may` is asked first, with the gang as one request (gangreclaim: may its queue reclaim
    that much)."""
    pending = pending_members(ssn, job)
    if not pending or any(t.preemption_never for t in pending):
        return None  # a gang whose pods say preemptionPolicy: Never evicts nobody (as preempt and reclaim)
    need = gang_need(ssn, job, pending)
    actor = as_one_request(pending, need)
    if not may(actor):
        return None
    zeros = ssn.dims.zeros()
    for domain in candidate_domains(ssn, job, max_domains):
        bundles = select(domain, actor, need)
        if not bundles:
            continue
        room = future_idle(ssn, domain)

        def attempt(chosen: list[Bundle], domain: Domain = domain, room: Vec = room) -> Plan | None:
            if not less_equal(need, room + _frees(chosen, domain, zeros)):
                return None
            return simulate(ssn, queue, job, pending, _victims(chosen, note), domain)

        chosen: list[Bundle] = []
        for bundle in bundles:
            chosen.append(bundle)
            plan = attempt(chosen)
            if plan is not None:
                placed, where = _reprieve(plan, chosen, attempt)
                stmt.merge(placed)
                return where
    return None


@dataclass(frozen=True, slots=True)
class Policy:
    """What tells gangpreempt and gangreclaim apart."""

    name: str
    kind: EvictionKind
    skip_overused: bool  # reclaim leaves an overused queue out
    victims: Callable[[Session, Job], list[tuple[Job, list[Task]]]]  # the jobs and pods that may go for `job`
    sort: Callable[[Session, Queue, list[Bundle], Vec], list[Bundle]]  # bundles, least important first
    note: Callable[[Job, Bundle], EvictionNote]  # why, for the victims' Events and conditions
    may: Callable[[Session, Queue, Task], bool]  # may `queue` evict for the gang as one request


def run(ssn: Session, policy: Policy) -> None:
    """The action: for each starving job (QueueOrder, then JobOrder) one Statement, committed only if the job is
    then pipelined (as legacy preempt and reclaim)."""
    args = arguments_of(ssn, policy.name)
    for queue, job in each_starving(ssn, policy.skip_overused):
        stmt = Statement(ssn)
        placed = _evict_for(ssn, stmt, policy, args, queue, job)
        if job.is_pipelined() and ssn.job_pipelined(job):
            stmt.commit()
            for sub, hypernode in (placed or {}).items():
                if hypernode != ssn.topology.root:  # the cluster top constrains nothing
                    ssn.nominate(job, sub, hypernode)
        else:
            stmt.discard()


def _evict_for(ssn: Session, stmt: Statement, policy: Policy, args: GangEvictArgs, queue: Queue,
               job: Job) -> dict[str, str] | None:
    def select(domain: Domain, actor: Task, need: Vec) -> list[Bundle]:
        return select_bundles(ssn, policy.kind, job, domain, actor, need, policy.victims(ssn, job),
                              lambda bundles, need: policy.sort(ssn, queue, bundles, need), args.allow_whole_bundle)

    return evict_for_gang(ssn, stmt, queue, job, args.max_domains, select, partial(policy.note, job),
                          partial(policy.may, ssn, queue))


__all__ = ["MAX_DOMAINS", "Domain", "GangEvictArgs", "Plan", "Policy", "arguments_of", "as_one_request",
           "candidate_domains", "domain_of", "evict_for_gang", "future_idle", "gang_need", "parse_arguments",
           "pending_members", "run", "select_bundles", "simulate", "victim_members"]
