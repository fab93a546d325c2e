"""What gangpreempt and gangreclaim share (Volcano's `actions/utils/util.go` and `simulate.go`): their arguments,
the domains they search, the gang's need, the simulated placement and the loop that picks victim bundles.

For a starving gang (the preemptor) the actions search candidate domains in order (Volcano's `GetCandidateDomains`
with `PurposeEvict`, at most `maxDomains`; without network topology the whole cluster is the one domain). In a
domain the action-specific `select` gives the victim bundles least important first (`bundles.py`); they are taken
one by one until the domain's future idle room plus what they free covers the gang's need, and then the gang's
whole placement is simulated on that room: a Statement evicts the victims and pipelines the gang's pending members
(task order) on the domain's best nodes, and is kept only if the gang is then pipelined (JobPipelined). A failed
simulation is discarded and the next bundle is added; a domain with no success leaves nothing behind. Once one
succeeds, upstream's reprieve gives back every bundle, most important first, without which the gang still fits,
so nothing is evicted beyond what the placement needs. Nothing is evicted at all when no domain fits the whole gang.

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
from extender.engine.actions.ordering import PriorityQueue, each_starving
from extender.engine.arguments import Arguments, boolean, integer
from extender.engine.interface import EvictionContext, EvictionKind
from extender.engine.model import Job, Node, Queue, Task
from extender.engine.session import EvictionNote, Session
from extender.engine.statement import Statement
from lapilli.resources.vector import Vec, less_equal

MAX_DOMAINS: Final = 8
CLUSTER_DOMAIN: Final = "<cluster>"  # Volcano's ClusterTopHyperNode: every node, when there is no topology


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
    """Where one attempt looks for room: a set of nodes (a HyperNode's, or the whole cluster)."""

    name: str
    nodes: tuple[Node, ...]
    mask: npt.NDArray[np.bool_]  # over the session's nodes
    names: frozenset[str]


def cluster_domain(ssn: Session) -> Domain:
    return Domain(CLUSTER_DOMAIN, tuple(ssn.nodes), np.ones(len(ssn.nodes), dtype=bool),
                  frozenset(n.name for n in ssn.nodes))


def pick_domains(gradients: Sequence[Sequence[str]], max_domains: int, fallback: str | None) -> list[str]:
    """Volcano's `PickDomainsFromGradients`: the gradients' domain names in order, each once, at most
    `max_domains` (≤ 0: no cap); `fallback` alone when there are none (None: no fallback)."""
    seen: dict[str, None] = {}
    for gradient in gradients:
        for name in gradient:
            seen.setdefault(name)
            if 0 < max_domains <= len(seen):
                return list(seen)
    if not seen and fallback is not None:
        return [fallback]
    return list(seen)


def candidate_domains(ssn: Session, job: Job, max_domains: int) -> list[Domain]:
    """Volcano's `GetCandidateDomains(ssn, job, maxDomains)`: the domains to search for `job`, widest first. Without
    network topology (no HyperNodes) that is the whole cluster, Volcano's fallback to the cluster's top."""
    names = pick_domains([], max_domains, CLUSTER_DOMAIN)
    return [cluster_domain(ssn) for name in names if name == CLUSTER_DOMAIN]


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
    rows = ssn.arrays.future_idle()[domain.mask]
    return rows.sum(axis=0) if len(rows) else ssn.dims.zeros()


def simulate(ssn: Session, queue: Queue, job: Job, pending: Sequence[Task],
             victims: Sequence[tuple[Task, EvictionNote]], domain: Domain) -> Statement | None:
    """Volcano's `BuildNominationPlanInDomain`: evict `victims` and pipeline the gang's pending members on the
    domain's nodes (idle room first, then room being released; best score, lowest name), in one Statement. It is
    returned, still applied, when the gang is then pipelined; otherwise discarded (the session is as before)."""
    trial = Statement(ssn)
    for victim, note in victims:
        trial.evict(victim, note)
    for task in pending:
        if _pipelined(ssn, job):
            break
        if not ssn.allocatable(queue, task):
            continue
        feasible, fit_idle = ssn.feasible(task)
        feasible = feasible & domain.mask
        if not feasible.any():
            continue
        idle = feasible & fit_idle
        trial.pipeline(task, ssn.best_node(task, idle if idle.any() else feasible))
    if _pipelined(ssn, job):
        return trial
    trial.discard()
    return None


def _pipelined(ssn: Session, job: Job) -> bool:
    # The gang's own count too: a conf without the gang plugin must not make an eviction that places nobody.
    return job.is_pipelined() and ssn.job_pipelined(job)


# The action's victim choice in a domain, given the gang as one request and its need: bundles, least important first.
Select = Callable[[Domain, Task, Vec], list[Bundle]]
Notes = Callable[[Bundle], EvictionNote]


Sort = Callable[[list[Bundle], Vec], list[Bundle]]


def select_bundles(ssn: Session, kind: EvictionKind, job: Job, domain: Domain, actor: Task, need: Vec,
                   victims: Sequence[Job], eligible: Callable[[Task], bool], sort: Sort,
                   allow_whole: bool) -> list[Bundle]:
    """The victim bundles in `domain`, least important first (Volcano's `selectDomainBundles`): every victim job's
    bundles from its members the action may take, sorted, asked of the plugins' UnifiedEvictable vote once over
    the whole ordered list, rebuilt from what the vote lets go (a whole bundle only if all of it), sorted again,
    and without whole bundles when `allowWholeBundle` is false."""
    zeros = ssn.dims.zeros()
    raw: list[Bundle] = []
    for victim in victims:
        # A member on a node the session does not hold (NotReady, gone) cannot be evicted through it.
        members = [t for t in victim.tasks.values() if eligible(t) and t.node in ssn.node_by_name]
        if members:
            raw.extend(job_bundles(victim, members, domain.names, zeros))
    if not raw:
        return []
    ordered = sort(raw, need)
    ctx = EvictionContext(kind, job, actor, domain.name)
    allowed = {t.uid for t in ssn.evictable(ctx, [t for b in ordered for t in b.tasks])}
    valid = sort(allowed_bundles(ordered, allowed, zeros, domain.names), need)
    return [b for b in valid if allow_whole or b.kind is BundleKind.SURPLUS]


def _victims(bundles: Sequence[Bundle], note: Notes) -> list[tuple[Task, EvictionNote]]:
    out: list[tuple[Task, EvictionNote]] = []
    for bundle in bundles:
        why = note(bundle)
        out.extend((task, why) for task in bundle.tasks)
    return out


def _frees(bundles: Sequence[Bundle], zeros: Vec) -> Vec:
    total = zeros.copy()
    for bundle in bundles:
        total += bundle.local
    return total


def _reprieve(ssn: Session, plan: Statement, chosen: list[Bundle], attempt: Callable[[list[Bundle]], Statement | None]
              ) -> Statement:
    """Upstream's reprieve: give back each chosen bundle, most important first, if the gang still fits without it.
    `plan` is the applied placement with all of `chosen`; the one returned is applied with what is kept."""
    kept = list(chosen)
    for bundle in reversed(chosen):
        if len(kept) == 1:
            break
        rest = [b for b in kept if b is not bundle]
        plan.discard()
        trial = attempt(rest)
        if trial is not None:
            kept, plan = rest, trial
            continue
        again = attempt(kept)
        assert again is not None  # the same placement as before: the session is exactly as it was
        plan = again
    return plan


def evict_for_gang(ssn: Session, stmt: Statement, queue: Queue, job: Job, max_domains: int, select: Select,
                   note: Notes, may: Callable[[Task], bool]) -> bool:
    """Make room for the whole of `job` in one domain by evicting bundles `select` offers; True once the gang's
    placement is simulated and its evictions and pipelines are in `stmt`. `may` is asked first, with the gang as
    one request (gangreclaim: may its queue reclaim that much)."""
    pending = pending_members(ssn, job)
    if not pending or any(t.preemption_never for t in pending):
        return False  # a gang whose pods say preemptionPolicy: Never evicts nobody (as preempt and reclaim)
    need = gang_need(ssn, job, pending)
    actor = as_one_request(pending, need)
    if not may(actor):
        return False
    zeros = ssn.dims.zeros()
    for domain in candidate_domains(ssn, job, max_domains):
        bundles = select(domain, actor, need)
        if not bundles:
            continue
        room = future_idle(ssn, domain)

        def attempt(chosen: list[Bundle], domain: Domain = domain, room: Vec = room) -> Statement | None:
            if not less_equal(need, room + _frees(chosen, zeros)):
                return None
            return simulate(ssn, queue, job, pending, _victims(chosen, note), domain)

        chosen: list[Bundle] = []
        for bundle in bundles:
            chosen.append(bundle)
            plan = attempt(chosen)
            if plan is not None:
                stmt.merge(_reprieve(ssn, plan, chosen, attempt))
                return True
    return False


@dataclass(frozen=True, slots=True)
class Policy:
    """What tells gangpreempt and gangreclaim apart."""

    name: str
    kind: EvictionKind
    skip_overused: bool  # reclaim leaves an overused queue out
    victims: Callable[[Session, Job], list[Job]]  # the jobs whose pods may be taken for `job`
    eligible: Callable[[Task], bool]  # which of their pods
    sort: Callable[[Session, Queue, list[Bundle], Vec], list[Bundle]]  # bundles, least important first
    note: Callable[[Job, Bundle], EvictionNote]  # why, for the victims' Events and conditions
    may: Callable[[Session, Queue, Task], bool]  # may `queue` evict for the gang as one request


def run(ssn: Session, policy: Policy) -> None:
    """The action: for each starving job (QueueOrder, then JobOrder) one Statement, committed only if the job is
    then pipelined (as legacy preempt and reclaim)."""
    args = arguments_of(ssn, policy.name)
    for queue, job in each_starving(ssn, policy.skip_overused):
        stmt = Statement(ssn)
        _evict_for(ssn, stmt, policy, args, queue, job)
        if job.is_pipelined() and ssn.job_pipelined(job):
            stmt.commit()
        else:
            stmt.discard()


def _evict_for(ssn: Session, stmt: Statement, policy: Policy, args: GangEvictArgs, queue: Queue, job: Job) -> None:
    def select(domain: Domain, actor: Task, need: Vec) -> list[Bundle]:
        return select_bundles(ssn, policy.kind, job, domain, actor, need, policy.victims(ssn, job), policy.eligible,
                              lambda bundles, need: policy.sort(ssn, queue, bundles, need), args.allow_whole_bundle)

    evict_for_gang(ssn, stmt, queue, job, args.max_domains, select, partial(policy.note, job),
                   partial(policy.may, ssn, queue))


__all__ = [
    "CLUSTER_DOMAIN",
    "MAX_DOMAINS",
    "Domain",
    "GangEvictArgs",
    "Policy",
    "arguments_of",
    "as_one_request",
    "candidate_domains",
    "evict_for_gang",
    "future_idle",
    "gang_need",
    "parse_arguments",
    "pending_members",
    "pick_domains",
    "run",
    "select_bundles",
    "simulate",
]
