"""Why a PodGroup waits, computed by the live scheduler's engine over the same snapshot and conf (pure, no I/O).

`explain(snapshot, conf, keys)` runs one session exactly as the scheduler does (`probe.probe`), and opens one more
over the same snapshot to see the cluster as the session found it; then, per PodGroup, it names each reason that
applies, most important first:

1. the queue: missing, or not Open (and who closed it, when the caller knows); a gang that ran and lost members is
   *degraded*: what it holds, what it lost, and that it regains them before new work of its queue;
2. admission (enqueue): minResources against the queue's capability and the cluster, per resource, with numbers —
   or "nothing can ever admit it" when minResources exceeds the cluster or the queue's capability;
3. fair share: the queue holds its deserved share, so allocate gives it nothing more now;
4. order: jobs (or queues) ordered first take the room it needs this session, with the job's place among its
   queue's waiting jobs and the queue's place among queues, and the keys that order them;
5. placement: for a gang with a hard network topology, the HyperNodes of its allowed tiers and the room the best
   of them has (`topology.py`); how many of minMember pods fit now, and what blocks the rest on how many nodes;
   "nothing in the cluster can ever fit this gang" when they do not fit even on empty nodes;
6. what would free room: reclaim allowed or not (and why), preemption candidates (shown only when the session did
   not preempt: a gang the candidates cannot make whole, say; when it does preempt, the answer is "starting soon").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from extender.engine.conf import SchedulerConf
from extender.engine.explain.admission import (
    cluster_shortage,
    gang_floor,
    never_admissible,
    queue_shortage,
    would_fit_at_open,
)
from extender.engine.explain.fit import GangFit, gang_fit
from extender.engine.explain.probe import (
    Recorded,
    cluster_view,
    opened,
    probe,
    quota_views,
)
from extender.engine.explain.report import WHY_CONDITION, Explanation, Kind, Reason
from extender.engine.explain.topology import topology_reasons
from extender.engine.explain.unblock import preempt, reclaim, request_text
from extender.engine.explain.units import amount, number
from extender.engine.explain.usage import usage_order
from extender.engine.interface import ExplainView
from extender.engine.model import ALLOCATED_STATUS, SCHEDULED_STATUS, Job, TaskStatus
from extender.engine.results import Decisions
from extender.engine.snapshot import Snapshot
from lapilli.meta import JSON

__all__ = ["WHY_CONDITION", "Context", "Explanation", "Kind", "Reason", "explain", "explain_one"]


@dataclass(frozen=True, slots=True)
class Context:
    """What the caller knows beyond the snapshot."""

    queue_closed_by: Mapping[str, str] = field(default_factory=dict)  # queue -> "by alice (CloseQueue Command)"


@dataclass(slots=True)
class _Run:
    snap: Snapshot
    conf: SchedulerConf
    now: float
    ssn: ExplainView  # the session the scheduler ran, closed
    recorded: Recorded
    result: Decisions
    context: Context
    _before: ExplainView | None = None

    @property
    def before(self) -> ExplainView:
        if self._before is None:
            self._before = opened(self.snap, self.conf, self.now)
        return self._before


def explain(
    snap: Snapshot, conf: SchedulerConf, keys: Iterable[str] | None = None, context: Context | None = None,
    now: float = 0.0,
) -> dict[str, Explanation]:
    """Explanations for `keys` (PodGroup `ns/name`; default: every PodGroup in the snapshot)."""
    wanted = sorted(snap.podgroups) if keys is None else list(keys)
    probed = probe(snap, conf, now, wanted)
    run = _Run(snap, conf, now, probed.ssn, probed.recorded, probed.result, context or Context())
    return {key: _explain(run, key) for key in wanted if key in snap.podgroups}


def explain_one(snap: Snapshot, conf: SchedulerConf, key: str, context: Context | None = None) -> Explanation:
    out = explain(snap, conf, [key], context)
    if key not in out:
        raise KeyError(key)
    return out[key]


def _explain(run: _Run, key: str) -> Explanation:
    pg = run.snap.podgroups[key]
    if pg.queue not in run.snap.queues:
        pods = sum(1 for p in run.snap.pods.values() if p.group == pg.name and p.namespace == pg.namespace)
        return Explanation(key, pg.queue, pg.phase or "Pending", pg.min_member, pods, 0, [Reason(
            Kind.QUEUE_MISSING, f"queue {pg.queue} does not exist: the scheduler ignores this PodGroup until it is "
            "created (or the job names another queue)", {"queue": pg.queue})])
    ssn = run.ssn
    job = ssn.jobs[key]
    phase = run.result.podgroups[key].phase
    out = Explanation(key, job.queue, phase, job.min_member, len(job.tasks), job.counts[TaskStatus.RUNNING])
    scheduled = job.count(SCHEDULED_STATUS)
    if phase in ("Running", "Completed") and not job.pending_tasks():
        out.reasons.append(Reason(Kind.RUNNING, f"{phase.lower()}: {scheduled} of {job.min_member} pods scheduled"))
        return out
    queue = ssn.queues[job.queue]
    if queue.state != "Open":
        who = run.context.queue_closed_by.get(queue.name)
        out.reasons.append(Reason(
            Kind.QUEUE_CLOSED, f"queue {queue.name} is {queue.state or 'not Open'}"
            + (f" (closed {who})" if who else "") + ": it admits and places nothing until it is opened again "
            f"(lapilli queue operate -n {queue.name} -a open)", {"queue": queue.name, "state": queue.state,
                                                                   **({"closed_by": who} if who else {})}))
    before = run.before.jobs[key]
    if before.degraded():
        out.reasons.append(_degraded(before))
    if job.is_pending():
        out.reasons.extend(_admission(run, job))
        return out
    started = _started(run, job)
    if started is not None:
        out.reasons.insert(0, started)
        return out
    out.reasons.extend(_admitted(run, job))
    if phase == "Running":
        out.reasons.insert(0, Reason(Kind.RUNNING, f"running: {scheduled} of {job.min_member} pods scheduled; "
                                     f"{len(job.pending_tasks())} more wait"))
    return out


def _degraded(job: Job) -> Reason:
    """A gang that ran and lost members: what it holds, what it lost, and what happens next."""
    placed = job.count(ALLOCATED_STATUS)
    counts = {"failed": job.counts[TaskStatus.FAILED], "being deleted": job.counts[TaskStatus.RELEASING],
              "recreated and waiting for room": job.counts[TaskStatus.PENDING],
              "missing (deleted or evicted, or on a node that is gone)": max(job.min_member - len(job.tasks), 0)}
    lost = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
    return Reason(Kind.DEGRADED, f"degraded: {placed} of minAvailable {job.min_member} pods hold their place"
                  + (f" ({lost})" if lost else "") + f"; it goes before new work of queue {job.queue} and keeps its "
                  "admission while it regains its members; if it cannot, a Volcano Job's lifecycle policies "
                  "(PodEvicted, PodFailed) decide after the service's heal window (--gang-heal-timeout)",
                  {"placed": placed, "minMember": job.min_member, "failed": counts["failed"],
                   "releasing": counts["being deleted"], "pending": counts["recreated and waiting for room"],
                   "missing": counts["missing (deleted or evicted, or on a node that is gone)"]})


def _started(run: _Run, job: Job) -> Reason | None:
    binds = sorted(k for k, t in ((t.key, t) for t in job.tasks.values()) if k in run.result.binds)
    pipelined = sorted(t.key for t in job.tasks.values() if t.key in run.result.pipelined)
    if binds and job.ready_num() >= job.min_member:
        nodes = sorted({run.result.binds[k] for k in binds})
        return Reason(Kind.STARTING, f"starting: this session places {len(binds)} pod(s) on {', '.join(nodes)}",
                      {"binds": {k: run.result.binds[k] for k in binds}})
    if pipelined and job.is_pipelined():
        evicted = len(run.result.evictions)
        return Reason(Kind.STARTING, f"starting soon: {len(pipelined)} pod(s) wait for room being freed"
                      + (f" ({evicted} pod(s) evicted this session)" if evicted else ""),
                      {"pipelined": {k: run.result.pipelined[k] for k in pipelined},
                       "evictions": sorted(run.result.evictions)})
    return None


# ---- not admitted ---------------------------------------------------------------------------------------------
def _admission(run: _Run, job: Job) -> list[Reason]:
    ssn = run.ssn
    reasons: list[Reason] = []
    need = job.min_resources
    if "enqueue" not in run.conf.actions:
        return [Reason(Kind.ORDER, "waiting for the next scheduling session to admit it")]
    if need is None:
        return [Reason(Kind.ORDER, "admitted in the next session (no minResources to check)")]
    before_quotas = quota_views(run.before, job.queue)
    limit = before_quotas[0].real_capability if before_quotas else ssn.queues[job.queue].capability
    never = never_admissible(ssn.dims, job.queue, need, limit, ssn.total)
    if never is not None:
        reasons.append(never)
    vote = run.recorded.enqueue.get(job.uid)
    short: list[Reason] = []
    if vote is not None and not vote.admitted:
        for view in vote.quotas:
            reason = queue_shortage(ssn.dims, job.queue, ssn.queues[job.queue].capability, need, view)
            if reason is not None:
                short.append(reason)
        if vote.cluster is not None:
            reason = cluster_shortage(ssn.dims, need, vote.cluster, ssn.total)
            if reason is not None:
                short.append(reason)
    # Jobs of the same queue ordered first and still waiting (or admitted this session) take the room first.
    ahead = _ahead(run, job, admitted_now=False, waiting_only=True) if never is None and short else None
    if ahead is None and never is None and short and would_fit_at_open(
            need, before_quotas[0] if before_quotas else None, cluster_view(run.before)):
        ahead = _ahead(run, job, admitted_now=True)
    if ahead is not None:
        reasons.append(ahead)
    reasons.extend(short)
    if not reasons and ssn.queues[job.queue].state == "Open":
        text = job.job_fit_error or "the enqueue vote refused it"
        reasons.append(Reason(Kind.CLUSTER_FULL, f"not admitted: {text}"))
    return reasons


# ---- admitted, not placed -------------------------------------------------------------------------------------
def _admitted(run: _Run, job: Job) -> list[Reason]:
    ssn = run.ssn
    invalid = ssn.job_valid(job)
    if invalid is not None and not job.tasks and run.snap.podgroups[job.uid].phase in ("", "Pending"):
        return [Reason(Kind.WAITING_PODS, f"admitted this session: the job controller creates its pods next "
                       f"(minMember {job.min_member})", {"pods": 0, "minMember": job.min_member})]
    if invalid is not None:
        return [Reason(Kind.WAITING_PODS, f"waiting for pods: {len(job.tasks)} exist, minMember is "
                       f"{job.min_member} ({invalid.message or invalid.reason})",
                       {"pods": len(job.tasks), "minMember": job.min_member})]
    never = _never_runs(run, job)
    if never is not None:
        return [never]
    reasons: list[Reason] = []
    share = _fair_share(run, job)
    now_fit = run.recorded.fit_after.get(job.uid) or gang_fit(run.before, run.before.jobs[job.uid])
    before_job = run.before.jobs[job.uid]
    open_fit = gang_fit(run.before, before_job)
    if not open_fit.fits:
        empty = _empty_cluster_fit(run, job)
        if empty is not None and not empty.fits:
            reasons.append(Reason(Kind.UNRESOLVABLE, "nothing in the cluster can ever fit this gang (as its nodes "
                                  "are set up): even on empty nodes " + empty.summary(), _fit_data(empty)))
    if now_fit.fits or open_fit.fits:
        ahead = _ahead(run, job, admitted_now=False, placed_only=True)
        if ahead is not None:
            reasons.append(ahead)
    if share is not None:
        reasons.append(share)
    reasons.extend(topology_reasons(run.before, before_job))
    fit = now_fit if not now_fit.fits else open_fit
    if not fit.fits:
        reasons.append(Reason(Kind.PLACEMENT, fit.summary(), _fit_data(fit)))
    elif not reasons:
        reasons.append(Reason(Kind.PLACEMENT, f"{fit.summary()} now: the next session places it"))
    if not open_fit.fits and all(r.kind is not Kind.UNRESOLVABLE for r in reasons):
        reasons.extend(_unblock(run, before_job))
    return reasons


def _never_runs(run: _Run, job: Job) -> Reason | None:
    """An admitted gang whose pods together ask more than its queue may ever hold: admission judged its
    minResources, which may not count what the pods really ask (a GPU given only as a limit). A gang larger than
    the whole cluster is left to the empty-cluster fit, which names the nodes."""
    ssn = run.ssn
    need = gang_floor([task.resreq for task in job.tasks.values()], job.min_member, ssn.dims)
    quotas = quota_views(run.before, job.queue)
    limit = quotas[0].real_capability if quotas else ssn.queues[job.queue].capability
    limit = np.where(limit < ssn.total, limit, np.inf)  # a queue bound only by the whole cluster: not this reason
    never = never_admissible(ssn.dims, job.queue, need, limit, np.full(ssn.dims.size, np.inf),
                             lead=f"this gang can never run as its queue is set up (from what its {job.min_member} "
                                  "pods ask)")
    if never is None:
        return None
    counted = job.min_resources if job.min_resources is not None else ssn.dims.zeros()
    short = never.data["resources"]
    missed: list[JSON] = [name for name in ssn.dims.names
                          if isinstance(short, dict) and name in short and counted[ssn.dims.index[name]] <= 0]
    if missed:  # why admission let it through
        never.message += f" (its PodGroup's minResources counts no {', '.join(map(str, missed))})"
        never.data["minResourcesMissing"] = missed
    return never


def _fit_data(fit: GangFit) -> dict[str, JSON]:
    return {"placeable": min(fit.ready + fit.placeable, fit.min_member), "minMember": fit.min_member,
            "blockedPod": fit.blocked, "nodes": fit.nodes, **({"cards": fit.cards} if fit.cards else {})}


def _fair_share(run: _Run, job: Job) -> Reason | None:
    ssn = run.ssn
    refused = run.recorded.refused.get(job.uid)
    overused = job.queue in run.recorded.overused
    if refused is None and not overused:
        return None
    views = refused or quota_views(run.before, job.queue)
    if not views:
        return None
    view = views[0]
    task = next(iter(job.pending_tasks()), None)
    parts, data = [], {}
    for i, name in enumerate(ssn.dims.names):
        if name == "pods" or (view.deserved[i] <= 0 and view.allocated[i] <= 0):
            continue
        if task is not None and task.resreq[i] <= 0:
            continue
        if task is not None and view.allocated[i] + task.resreq[i] <= view.deserved[i]:
            continue
        if view.deserved[i] >= ssn.total[i] - 1e-6:
            continue  # deserved is the whole cluster: no other queue's share holds it back
        parts.append(f"{name} {amount(name, float(view.allocated[i]))} of its deserved "
                     f"{amount(name, float(view.deserved[i]))}")
        data[name] = {"allocated": number(name, float(view.allocated[i])),
                      "deserved": number(name, float(view.deserved[i]))}
    if not parts:
        return None
    held = "; ".join(parts)
    fairer = [e for e in run.recorded.queue_order if e.uid != job.queue and e.key.get("share") is not None
              and e.key["share"] < view.share]
    others = (", ".join(f"{e.uid} (share {e.key['share']:.2f})" for e in fairer[:3]) + " want"
              + ("s" if len(fairer) == 1 else "") + " room too") if fairer else "other queues want room too"
    return Reason(Kind.FAIR_SHARE, f"queue {job.queue} holds {held} (fair share by {view.plugin}, share "
                  f"{view.share:.2f}); {others}: it gets more only as their demand falls",
                  {"queue": job.queue, "share": round(view.share, 6), "resources": data,
                   "fairerQueues": [e.uid for e in fairer]})


def _ahead(run: _Run, job: Job, *, admitted_now: bool, placed_only: bool = False,
           waiting_only: bool = False) -> Reason | None:
    """ORDER: jobs of the same queue ordered first (that took room this session, were admitted this session, or
    still wait), or queues ordered first; either way the message gives both places — the job's among its queue's
    waiting jobs and the queue's among queues — with the keys that order them."""
    ssn = run.ssn
    entries = run.recorded.job_order.get(job.queue, [])
    mine = next((e for e in entries if e.uid == job.uid), None)
    queues = run.recorded.queue_order
    qmine = next((e for e in queues if e.uid == job.queue), None)
    took = _took_room(run)
    cause: tuple[str, dict[str, JSON]] | None = None
    if mine is not None:
        ahead = [e for e in entries[: mine.rank - 1] if not placed_only or e.uid in took]
        if admitted_now:
            ahead = [e for e in ahead if ssn.jobs[e.uid].phase == "Inqueue" and run.snap.podgroups[e.uid].phase in
                     ("", "Pending")]
        if waiting_only:
            ahead = [e for e in ahead if e.uid not in took]
        if ahead:
            first = ahead[0]
            cause = (f"behind {len(ahead)} job(s) of queue {job.queue}: {first.uid} goes first "
                     f"({_why_first(first.key, mine.key)})", {"ahead": [e.uid for e in ahead], "firstKey": first.key})
    if cause is None and not waiting_only and qmine is not None and qmine.rank > 1:
        qahead = [e for e in queues[: qmine.rank - 1] if not placed_only or any(
            ssn.jobs[u].queue == e.uid for u in took)]
        if qahead:
            first = qahead[0]
            used = usage_order(ssn, first.uid, job.queue)
            cause = (f"queue {job.queue} is behind {len(qahead)} queue(s): " + (used[0] if used else
                     f"{first.uid} goes first ({_why_first(first.key, qmine.key)})"),
                     {"queuesAhead": [e.uid for e in qahead], "firstKey": first.key,
                      **({"usage": used[1]} if used else {})})
    if cause is None:
        return None
    text, data = cause
    places = []
    if mine is not None:
        places.append(f"the job is {_nth(mine.rank)} of the queue's {len(entries)} waiting job(s) "
                      f"({_key_text(mine.key)})")
        data.update({"position": mine.rank, "of": len(entries), "key": mine.key})
    if qmine is not None:
        places.append(f"queue {job.queue} {_nth(qmine.rank)} of {len(queues)} queue(s) ({_key_text(qmine.key)})")
        data.update({"queuePosition": qmine.rank, "queues": len(queues), "queueKey": qmine.key})
    return Reason(Kind.ORDER, f"{text}; {', and '.join(places)}" if places else text, data)


def _key_text(key: Mapping[str, float]) -> str:
    """The ordering key as words (creation time is only the last tie-break, so it is left out)."""
    parts = []
    for name, value in key.items():
        if name == "priority":
            parts.append(f"priority {value:.0f}")
        elif name in _SHARE_LABELS:
            parts.append(f"{_SHARE_LABELS[name]} {value:.2f}")
    return ", ".join(parts)


def _took_room(run: _Run) -> set[str]:
    jobs: set[str] = set()
    for task in run.ssn.tasks.values():
        if task.key in run.result.binds or task.key in run.result.pipelined:
            jobs.add(task.job)
    return jobs


_SHARE_LABELS = {"share": "share", "drf_share": "DRF dominant share"}


def _why_first(first: Mapping[str, float], mine: Mapping[str, float]) -> str:
    for name, value in first.items():
        other = mine.get(name)
        if other == value:
            continue
        if name == "priority":
            return f"priority {value} > {other}"
        if name in _SHARE_LABELS:
            return f"{_SHARE_LABELS[name]} {value:.2f} < {other:.2f}"
        if name == "created":
            return "created earlier"
    return "same priority and share; earlier or lower name"


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _empty_cluster_fit(run: _Run, job: Job) -> GangFit | None:
    """The gang alone on the cluster's nodes (its own pods back to pending, nothing else running)."""
    snap = run.snap
    pg = snap.podgroups[job.uid]
    empty = Snapshot(nodes=dict(snap.nodes), queues=dict(snap.queues), priority_classes=dict(snap.priority_classes),
                     default_priority=snap.default_priority, namespaces=dict(snap.namespaces),
                     device_configs=dict(snap.device_configs))
    empty.podgroups[job.uid] = pg
    for key, pod in snap.pods.items():
        if pod.group == pg.name and pod.namespace == pg.namespace and pod.phase in ("Pending", "Running"):
            empty.pods[key] = dataclasses.replace(pod, node_name=None, phase="Pending", deleting=False)
    ssn = opened(empty, run.conf, run.now)
    alone = ssn.jobs.get(job.uid)
    return gang_fit(ssn, alone) if alone is not None else None


def _unblock(run: _Run, job: Job) -> list[Reason]:
    ssn = run.before
    tasks = job.pending_tasks()
    if not tasks:
        return []
    task = tasks[0]
    out = [reclaim(ssn, run.conf.actions, job, task)]
    pre = preempt(ssn, run.conf.actions, job, task)
    if pre is not None:
        out.append(pre)
    out[0].data["request"] = request_text(ssn, task)
    return out


