"""The Job controller loop: watch events become requests, workers turn requests into actions.

Mirrors `pkg/controllers/job/job_controller*.go`: handlers classify events (`requests.py`) and queue them
under the Job's key; a worker takes a key (never two workers on one Job), applies the lifecycle policies to
each queued request in order (`policies.py`; a lost member's may wait for its gang to heal, `heal.py`), holds
back actions with a timeout (`delays.py`), executes the
rest through the state machine (`state.py`, `actions.py`) — consecutive syncs collapse into one — and retries
a failed request with exponential back-off. After `max_requeue` failures the Job is terminated, as Volcano's
`--max-requeue-num` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Final

import pydantic

from controller.context import Context
from controller.jobs.actions import ActionError, JobActions, StaleJob
from controller.jobs.delays import DelayedActions
from controller.jobs.heal import DEGRADED_REASON, LOSS_EVENTS, degraded_message, heal_first, short
from controller.jobs.policies import Decision, apply_policies
from controller.jobs.requests import Request, job_owner, pod_request
from controller.jobs.resources import PvcMissing
from controller.jobs.state import step_for
from controller.jobs.sync import Target, pod_task
from lapilli.api import Action, Event, Job, JobEvent
from lapilli.api.constants import JOB_NAME_KEY
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter, WorkQueue, run_worker
from lapilli.kube import REQUEST_ERRORS
from lapilli.meta import Obj, annotations_of, key_of, name_of, namespace_of, owner_references, resource_version, uid_of

log = logging.getLogger(__name__)

_RETRYABLE: Final = (ActionError, PvcMissing, *REQUEST_ERRORS)
_INTERNAL_ACTIONS: Final = frozenset({Action.SYNC_JOB, Action.ENQUEUE_JOB, Action.SYNC_QUEUE})
_JOB_ACTIONS: Final = frozenset({Action.RESTART_JOB, Action.ABORT_JOB, Action.TERMINATE_JOB, Action.COMPLETE_JOB})


def _phase(obj: Obj | None) -> str:
    return str((((obj or {}).get("status") or {}).get("state") or {}).get("phase") or "")


async def _no_cleanup(_job: Obj) -> None:
    return None


def _unschedulable(pg: Obj | None) -> str:
    """The scheduler's current reason a gang waits ("" when it does not)."""
    for cond in ((pg or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Unschedulable" and cond.get("status") == "True":
            return str(cond.get("message") or "")
    return ""


class JobController:
    def __init__(self, ctx: Context, cleanup: Callable[[Obj], Awaitable[None]] | None = None) -> None:
        self.ctx = ctx
        self.actions = JobActions(ctx)
        self._cleanup = cleanup or _no_cleanup
        self._deleted: dict[str, list[Obj]] = {}  # job key -> deleted incarnations whose children must go
        self.queue: WorkQueue[str] = WorkQueue()
        self.delays = DelayedActions(self.submit)
        # Gangs below minAvailable whose loss no policy acts on: checked once the heal window has passed.
        self.heals = DelayedActions(self._heal_deadline)
        self._requests: dict[str, list[Request]] = {}
        # A failed request is retried after 50 ms doubling to a minute, up to --max-requeue-num times.
        self._retries: RateLimiter[Request] = RateLimiter(0.05, 60.0)
        self._evicted: set[str] = set()  # pod UIDs whose deletion was already reported once
        self._parsed: OrderedDict[tuple[str, str], Job] = OrderedDict()
        self.executed = 0

    # -- event handlers (synchronous, called after the stores have seen the event) --------------------------

    def submit(self, req: Request) -> None:
        queued = self._requests.setdefault(req.key, [])
        if req not in queued:
            queued.append(req)
        self.queue.add(req.key)

    def on_job(self, event: WatchEvent) -> None:
        key = key_of(event.obj)
        if event.type == "DELETED":
            self.delays.forget_job(key)
            self.heals.forget_job(key)
            self._requests.pop(key, None)
            self.actions.forget(key)
            # Cleaned up by a worker, so never while a sync of this Job may still be creating pods.
            self._deleted.setdefault(key, []).append(event.obj)
            self.queue.add(key)
            return
        old = event.old
        if old is not None and old.get("spec") == event.obj.get("spec") and _phase(old) == _phase(event.obj):
            return  # only the status moved (our own write, mostly): nothing to reconcile
        self.submit(Request(namespace_of(event.obj), name_of(event.obj), event=Event.OUT_OF_SYNC))

    def on_pod(self, event: WatchEvent) -> None:
        pod = event.obj
        if job_owner(pod) is None:
            return
        job_key = f"{namespace_of(pod)}/{annotations_of(pod).get(JOB_NAME_KEY)}"
        task = pod_task(pod)
        siblings = [p for p in self.ctx.pods.by_index("job", job_key) if pod_task(p) == task]
        uid = uid_of(pod)
        req = pod_request(event.type, pod, event.old, job=self.ctx.jobs.get(job_key), task_pods=siblings,
                          first_deletion=uid not in self._evicted)
        if event.type == "DELETED":
            self._evicted.discard(uid)
        elif req is not None and req.event == Event.POD_EVICTED:
            self._evicted.add(uid)
        if req is not None:
            self.delays.observe(req)
            self.heals.observe(req)
            self.submit(req)

    def on_podgroup(self, event: WatchEvent, *, deleted_by_us: bool) -> None:
        pg = event.obj
        owner = next((o for o in owner_references(pg) if o.get("kind") == "Job"), None)
        job_name = str((owner or {}).get("name") or name_of(pg))
        namespace = namespace_of(pg)
        if event.type == "DELETED":
            if not deleted_by_us and owner is not None and f"{namespace}/{job_name}" in self.ctx.jobs:
                self.submit(Request(namespace, job_name, event=Event.OUT_OF_SYNC))  # someone removed the gang
            return
        phase = str((pg.get("status") or {}).get("phase") or "")
        before = str(((event.old or {}).get("status") or {}).get("phase") or "")
        # A PodGroup first seen already admitted counts as a phase change too: a re-list after a watch gap (410)
        # delivers the one the controller created and the scheduler admitted meanwhile as a single ADDED, and
        # without a sync its pods would never be made.
        moved = phase != before if event.type == "MODIFIED" else phase not in ("", "Pending")
        if moved:
            self.submit(Request(namespace, job_name, event=Event.JOB_UNKNOWN if phase == "Unknown" else None))
        elif event.type == "MODIFIED" and _unschedulable(pg) != _unschedulable(event.old):
            self.submit(Request(namespace, job_name))  # a new reason to wait: tell it on the Job (PodGroupPending)

    # -- workers -----------------------------------------------------------------------------------------------

    async def run_worker(self) -> None:
        await run_worker(self.queue, self._process, name="job", retried=self.ctx.metrics.retried("jobs"))

    def _job(self, key: str) -> tuple[Obj, Job] | None:
        doc = self.ctx.jobs.get(key)
        if doc is None:
            return None
        cache_key = (uid_of(doc), resource_version(doc))
        job = self._parsed.get(cache_key)
        if job is None:
            try:
                job = Job.from_wire(doc)
            except pydantic.ValidationError as exc:
                self.ctx.recorder.record(doc, "Warning", JobEvent.JOB_STATUS_ERROR.value, f"invalid Job: {exc}")
                return None
            self._parsed[cache_key] = job
            while len(self._parsed) > 1024:
                self._parsed.popitem(last=False)
        return doc, job

    async def _process(self, key: str) -> None:
        gone = self._deleted.pop(key, [])
        pending = self._requests.pop(key, [])
        try:
            while gone:
                await self._cleanup(gone[0])
                gone.pop(0)
            await self._handle(key, pending)
        except Exception:
            # What was not done goes back ahead of anything queued since: the worker's retry starts where this stopped.
            if gone:
                self._deleted[key] = [*gone, *self._deleted.get(key, [])]
            if pending:
                later = self._requests.get(key, [])
                self._requests[key] = [*pending, *(r for r in later if r not in pending)]
            raise

    async def _handle(self, key: str, pending: list[Request]) -> None:
        """Apply the policies to each request in order, taking each out of `pending` once handled; consecutive
        syncs collapse into one, run after the rest."""
        sync: Request | None = None
        for req in list(pending):
            found = self._job(key)
            if found is None:
                pending.clear()
                return
            doc, job = found
            decision = self._heal_first(key, job, req, apply_policies(job, req))
            if decision.delay_s > 0 and not req.delayed:
                if self.delays.schedule(req, decision.action, decision.delay_s):
                    message = f"Execute action {decision.action} after {decision.delay_s:g}s"
                    self.ctx.recorder.record(doc, "Normal", JobEvent.EXECUTE_ACTION.value, message)
                if req.event in LOSS_EVENTS and sync is None:
                    sync = req  # make the lost member again: its running again is what cancels the delay
                    continue  # stays pending until it runs
            elif decision.action != Action.SYNC_JOB:
                await self._run(key, req, decision.action)
            elif sync is None:
                sync = req
                continue  # stays pending until it runs
            pending.remove(req)
        if sync is not None:
            await self._run(key, sync, Action.SYNC_JOB)
            pending.remove(sync)

    def _heal_first(self, key: str, job: Job, req: Request, decision: Decision) -> Decision:
        """A lost member's policy may wait for the gang to heal (heal.py); a loss no policy acts on is checked
        again once the heal window has passed."""
        if req.event not in LOSS_EVENTS or req.delayed:
            return decision
        gang = short(job, self.ctx.pods.by_index("job", key))
        timeout = self.ctx.settings.gang_heal_timeout_s
        if gang is not None and not decision.policy_matched:
            self.heals.schedule(req, Action.SYNC_JOB, timeout)
        return heal_first(decision, req, gang, timeout)

    def _heal_deadline(self, req: Request) -> None:
        """The heal window of a loss no policy acts on has passed: a gang still short gets its Warning Event."""
        found = self._job(req.key)
        if found is None:
            return
        doc, job = found
        if req.job_uid and req.job_uid != uid_of(doc):
            return
        gang = short(job, self.ctx.pods.by_index("job", req.key))
        if gang is not None:
            message = degraded_message(req, gang, self.ctx.settings.gang_heal_timeout_s)
            self.ctx.recorder.record(doc, "Warning", DEGRADED_REASON, message)

    async def _run(self, key: str, req: Request, action: Action) -> None:
        found = self._job(key)
        if found is None:
            return
        doc, job = found
        if action not in _INTERNAL_ACTIONS:
            self.ctx.recorder.record(doc, "Normal", JobEvent.EXECUTE_ACTION.value, f"Start to execute action {action} ")
        step = step_for(job.status.state.phase, action)
        target = Target(task=req.task, pod=req.pod_name if action == Action.RESTART_POD else "",
                        partition=req.partition if action == Action.RESTART_PARTITION else "")
        began = time.perf_counter()
        try:
            await self.actions.execute(doc, step, target)
        except StaleJob:
            self.submit(req)  # the fresh Job is in the store now
            return
        except _RETRYABLE as exc:
            self.ctx.metrics.actions.labels(action.value, "error").inc()
            await self._failed(key, req, action, exc)
            return
        self.executed += 1
        self.ctx.metrics.actions.labels(action.value, "ok").inc()
        self.ctx.metrics.sync_seconds.labels(action.value).observe(time.perf_counter() - began)
        self._retries.forget(req)
        if action not in _INTERNAL_ACTIONS:
            self.delays.executed(req, action)
            if action in _JOB_ACTIONS:
                self.heals.forget_job(key)  # the gang was restarted, ended or aborted: nothing left to heal

    async def _failed(self, key: str, req: Request, action: Action, exc: Exception) -> None:
        attempts = self._retries.num_requeues(req) + 1
        limit = self.ctx.settings.max_requeue
        if limit < 0 or attempts < limit:
            delay = self._retries.when(req)
            log.info("job %s: %s failed (%s); retry %d in %.2fs", key, action, exc, attempts, delay)
            asyncio.get_running_loop().call_later(delay, self.submit, req)
            return
        self._retries.forget(req)
        found = self._job(key)
        if found is None:
            return
        doc, job = found
        message = f"Job failed on action {action} for retry limit reached"
        self.ctx.recorder.record(doc, "Warning", JobEvent.EXECUTE_ACTION.value, message)
        log.warning("job %s: %s; terminating it and releasing its resources", key, message)
        with contextlib.suppress(*_RETRYABLE, StaleJob):
            await self.actions.execute(doc, step_for(job.status.state.phase, Action.TERMINATE_JOB))
