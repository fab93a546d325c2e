"""The session loop: every period and on change, run the configured actions over a fresh snapshot (with the plan
overlaid) in a worker thread, then turn the outcome into new gang plans, evictions, status writes and PodGroup
events.

The verbs never wait for a session: they read `latest` (swapped whole) and the plan. Nor does the next session
wait for the last one's writes: its plans reach the verbs at once, and the writes go in the background, one
outcome's after the other's (`apply`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from extender.engine.conf import SchedulerConf
from extender.engine.run import parse_scheduler_conf
from extender.service.metrics import ExtenderMetrics
from extender.service.plan import Plan
from extender.service.runner import SessionRunner, ThreadRunner
from extender.service.session import Eviction, Outcome
from extender.service.state import WATCHED, ClusterState
from lapilli.api.constants import EVICTED_BY_ANNOTATION
from lapilli.cluster import RateLimiter
from lapilli.kube import KubeClient
from lapilli.kube.errors import ApiError, NotFound
from lapilli.kube.events import EventRecorder
from lapilli.kube.resources import PODGROUPS, PODS, QUEUES
from lapilli.meta import uid_of
from lapilli.reload import ReloadingFile
from lapilli.tasks import cancel_and_wait

log = logging.getLogger("lapilli.extender")

PLANNED_ANNOTATION = "lapilli.io/planned"
WRITE_CONCURRENCY = 16
# The session runs in a worker thread; a short GIL switch interval lets the event loop answer a verb within
# about this long while a session computes (CPython's default is 5 ms).
SWITCH_INTERVAL_S = 0.0002
MIN_SESSION_GAP_S = 0.2
FAILING_AFTER = 3  # sessions failed in a row before the service says it is not ready
MAX_FAILURE_BACKOFF_S = 30.0
_SESSION = "session"  # the session loop's one item in its rate limiter
# Volcano's scheduler records its events as its scheduler name (`--scheduler-name`, default `volcano`), which is
# what `kubectl describe podgroup` users of Volcano look for under From.
EVENT_SOURCE = "volcano"
# The Warning Event on an object the scheduler cannot read (a malformed quantity, minMember not a number…).
IGNORED_REASON = "InvalidObject"
# The Warning Event on a node whose vGPU register annotation, or a pod whose card assignment, cannot be read.
CARDS_REASON = "InvalidDeviceAnnotation"
WATCHED_KINDS = tuple(res.kind for res in WATCHED)
# Each PodGroup's last Unschedulable and Scheduled events, so a paced repeat bumps its Event in place; past this
# many a repeat creates a new Event (and old ones pile up until the API server's event TTL).
REMEMBERED_EVENTS = 65_536


class ConfSource:
    """The scheduler configuration file (`lapilli.reload.ReloadingFile`): a reload that cannot be used keeps the
    last good configuration running, reported once per distinct problem (the service counts it in
    `lapilli_scheduler_conf_reload_errors_total`; `lapilli_scheduler_conf_stale` is 1 while `error` is set). At start
    a bad file is refused outright (settings check), never replaced. Without a file: Volcano's default conf."""

    def __init__(self, path: Path | None, on_error: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._file = (ReloadingFile(path, parse_scheduler_conf, "scheduler configuration", on_error, self._warn)
                      if path is not None else None)
        self._default = parse_scheduler_conf(None)

    def _warn(self, conf: SchedulerConf) -> None:
        """Each load reports what it left out once (unknown action or plugin names), as Volcano logs them."""
        for warning in conf.warnings:
            log.warning("scheduler configuration %s: %s", self.path or "(default)", warning)

    @property
    def conf(self) -> SchedulerConf:
        return self._file.value if self._file is not None else self._default

    @property
    def error(self) -> str:
        return self._file.error if self._file is not None else ""

    def refresh(self) -> SchedulerConf:
        return self._file.refresh() if self._file is not None else self._default


def new_term_id() -> str:
    return uuid.uuid4().hex[:12]


class SessionLoop:
    def __init__(
        self,
        state: ClusterState,
        plan: Plan,
        client: KubeClient,
        conf: ConfSource,
        metrics: ExtenderMetrics,
        period_s: float = 1.0,
        is_leader: Callable[[], bool] = lambda: True,
        runner: SessionRunner | None = None,
    ) -> None:
        self.state, self.plan, self.client, self.conf, self.metrics = state, plan, client, conf, metrics
        self.runner: SessionRunner = runner or ThreadRunner(state)
        self.period_s = period_s
        self.is_leader = is_leader
        self.latest: Outcome | None = None
        self.waiting: set[str] = set()  # pods filter turned away for want of a plan
        self._leading = False  # a term (this process synced and holding the Lease) is under way
        self._term_began: float | None = None  # when the term began, until its first session's outcome
        self._planned = False  # this term has had a session outcome
        # Tells this term's touches (`_touch`) from every earlier one's, whichever process or replica wrote those.
        self._term_id = new_term_id()
        # A failed session waits period_s doubling to MAX_FAILURE_BACKOFF_S before the next one.
        self._retries: RateLimiter[str] = RateLimiter(period_s, MAX_FAILURE_BACKOFF_S)
        self._wake = asyncio.Event()
        self._recent_evictions: dict[str, float] = {}
        self._write = asyncio.Semaphore(WRITE_CONCURRENCY)
        # The last outcome's writes (evictions, statuses, touches, events), while they go on beside the next session.
        self._applying: asyncio.Task[None] | None = None
        self.recorder = EventRecorder(client, EVENT_SOURCE, remembered=REMEMBERED_EVENTS)
        self._reported: dict[str, str] = {}  # ignored object -> the reason this term's Event gave
        # The ignored-object counts last exported: nine labelled gauge sets a session cost ~0.1 ms of the event loop
        # the verbs answer on, and the counts hardly ever change.
        self._exported: dict[str, int] = {}
        # Idle-GPU reclaim (`extender.service.idle`): the pods each session hands the engine as idle-reclaimable,
        # and who hears of each eviction (pod key, action).
        self.idle: Callable[[], frozenset[str]] = frozenset
        self.evicted: Callable[[str, str], None] = lambda _pod, _action: None
        # Who hears that a PodGroup started running: (key, queue, created, started), wall seconds (the history).
        self.on_running: Callable[[str, str, float, float], None] = lambda *_job: None

    def poke(self) -> None:
        """Ask for a session soon (a change was seen, or a verb needs a plan)."""
        self._wake.set()

    async def run_forever(self) -> None:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            await self._sessions()
        finally:
            if self._applying is not None:
                await cancel_and_wait(self._applying)

    async def _sessions(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancel that lands as the wait ends,
            # and this loop would then never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.period_s):
                    await self._wake.wait()
            self._wake.clear()
            if not self.term():
                continue
            try:
                outcome = await self.decide()
                # The writes of one outcome land before the next one's: a status is never overtaken by an older
                # one, and an eviction already under way is not sent twice. Waiting here, after the session, lets
                # the two overlap; at a burst's start the first outcome's writes (a status for every PodGroup)
                # used to hold the next session, and kube-scheduler met the new gangs' pods with no plan. When the
                # last writes failed, this outcome's are not sent either: later sessions find its touches and
                # evictions due again, and its statuses once the pacer stops holding them as sent (10 s).
                if self._applying is not None:
                    applying, self._applying = self._applying, None
                    await applying
                if outcome is not None:
                    self._applying = asyncio.create_task(self.apply(outcome), name="session-writes")
            except Exception:
                delay = self._retries.when(_SESSION)
                self.metrics.session_failures.inc()
                log.exception("scheduling session, or the last one's writes, failed (%d in a row); retrying in %.0fs",
                              self.failures, delay)
                # A failing session is not retried at the event rate: each retry may respawn the session
                # process, and with it a full relist of the cluster.
                await asyncio.sleep(delay)
                continue
            self._retries.forget(_SESSION)
            # Coalesce bursts of watch events: at most five sessions a second, each over the whole cluster.
            await asyncio.sleep(MIN_SESSION_GAP_S)

    def term(self) -> bool:
        """Whether this replica leads now (synced and holding the Lease), acting as a term begins or ends."""
        if not (self.state.synced and self.is_leader()):
            if self._leading:
                # A follower's counts would go stale beside the new leader's: it exports none.
                self.metrics.queue_jobs.clear()
                self.metrics.ignored.clear()
            self._leading = self._planned = False
            return False
        if not self._leading:
            self._leading, self._planned = True, False
            self._reported.clear()  # a new term tells again what it leaves out
            self._exported.clear()  # and exports its counts again (a follower exports none)
            self._term_began = time.monotonic()
            self._term_id = new_term_id()
            self.requeue_pending()
        return True

    def planning(self) -> bool:
        """Whether a plan is on its way: the caches are still syncing (this replica may lead once they are), or it
        leads and its term has had no session outcome yet (and sessions are not failing). kube-scheduler's filter
        calls wait for it meanwhile (`extender.service.http.HOLD_S`): a call refused now would set its pod aside
        with a back-off of up to 10 s, and gangs would come back split."""
        return not self.state.synced or (self.is_leader() and not self._planned and self.healthy())

    @property
    def failures(self) -> int:
        """Sessions failed in a row."""
        return self._retries.num_requeues(_SESSION)

    def healthy(self) -> bool:
        """False while sessions keep failing (`/readyz` turns false with it): nothing is being scheduled."""
        return self.failures < FAILING_AFTER

    async def run_once(self) -> Outcome | None:
        """One session and all its writes."""
        outcome = await self.decide()
        if outcome is not None:
            await self.apply(outcome)
        return outcome

    async def decide(self) -> Outcome | None:
        """One session: its plans adopted and its outcome the one the verbs read (None: the session's view of the
        cluster is not synced yet)."""
        self.report_ignored()
        now = time.monotonic()
        for gang in self.plan.expire(now):
            log.info("gang %s: plan expired before it bound; re-planning", gang)
        placements, devices = self.plan.assumed()
        outcome = await self.runner(placements, self.conf.refresh(), self.idle(), devices)
        if outcome is None:
            return None  # the session's own view of the cluster is not synced yet
        self.metrics.session_seconds.observe(outcome.seconds)
        if self._term_began is not None:  # the first session of a term: how long a restart or takeover waited
            log.info("first session of this term: %d gangs planned, %d pods waiting, %.2fs in the session, "
                     "%.1fs after the term began", len(outcome.new_plans), len(self.waiting), outcome.seconds,
                     time.monotonic() - self._term_began)
            self._term_began = None
        self._adopt(outcome, now)
        self.latest = outcome
        self._planned = True
        return outcome

    async def apply(self, outcome: Outcome) -> None:
        """An outcome's writes: evictions, status writes, touches of the pods its plans let come back, events."""
        await asyncio.gather(self._evict(outcome), self._write_status(outcome), self._requeue())
        # After the statuses, as Volcano's UpdateJobStatus does: whoever reads an event finds the condition it
        # reports already stored.
        self._record_events(outcome)

    def report_ignored(self) -> None:
        """Objects the cluster state leaves out (it cannot read them) vanish from scheduling silently unless told:
        each gets a Warning Event once per reason and term, and `lapilli_extender_ignored_objects` counts them.
        So do nodes whose vGPU register annotation (their cards are ignored) and pods whose card assignment cannot
        be read (in part), under kinds `Node devices` / `Pod devices`."""
        ignored = self.state.ignored
        counts = dict.fromkeys((*WATCHED_KINDS, "Node devices", "Pod devices"), 0)
        for ident, (kind, ref, error) in ignored.items():
            counts[kind] = counts.get(kind, 0) + 1
            if self._reported.get(ident) != error:
                self._reported[ident] = error
                message = f"the scheduler leaves this {kind} out until it can be read: {error}"
                self.recorder.record(ref, "Warning", IGNORED_REASON, message)
        problems = self.state.card_problems
        for ident, (kind, ref, error) in problems.items():
            counts[f"{kind} devices"] = counts.get(f"{kind} devices", 0) + 1
            if self._reported.get(f"devices {ident}") != error:
                self._reported[f"devices {ident}"] = error
                message = f"the scheduler ignores what it cannot read of this {kind}'s vGPU annotation: {error}"
                self.recorder.record(ref, "Warning", CARDS_REASON, message)
        stale = [i for i in self._reported
                 if (i.removeprefix("devices ") not in problems if i.startswith("devices ") else i not in ignored)]
        for ident in stale:
            del self._reported[ident]
        if counts != self._exported:
            for kind, count in counts.items():
                self.metrics.ignored.labels(kind).set(count)
            self._exported = counts

    def _adopt(self, outcome: Outcome, now: float) -> None:
        for gang, (min_member, planned, domain, planned_devices) in outcome.new_plans.items():
            # The session's view may lag this one (its own copy of the cluster in the session process, or a
            # snapshot taken before a bind landed): a pod bound, ended or gone meanwhile is not planned again.
            # Its settling was already heard, so nothing would take it off the plan until the plan expired, and
            # its PodGroup's status would wait that long, read as still on its way through bind.
            nodes = {pod: node for pod, node in planned.items() if self.state.awaits_node(pod)}
            if not nodes:
                continue
            devices = {pod: cards for pod, cards in planned_devices.items() if pod in nodes}
            held = outcome.domains.get(domain) if domain else None
            if gang in self.plan.gangs:
                self.plan.extend(gang, min_member, nodes, held, devices)
            else:
                self.plan.add(gang, min_member, nodes, now, held, devices)

    async def _evict(self, outcome: Outcome) -> None:
        now = time.monotonic()
        self._recent_evictions = {k: t for k, t in self._recent_evictions.items() if now - t < 30}
        todo = [k for k in outcome.evictions if k not in self._recent_evictions]
        for key in todo:
            self._recent_evictions[key] = now
        self.metrics.evictions_in_flight.inc(len(todo))
        await asyncio.gather(*(self._evict_one(key, outcome.evicted_by.get(key, Eviction("", ""))) for key in todo))

    async def _evict_one(self, key: str, why: Eviction) -> None:
        try:
            await self._evict_pod(key, why)
        finally:
            self.metrics.evictions_in_flight.dec()

    async def _evict_pod(self, key: str, why: Eviction) -> None:
        namespace, name = key.split("/", 1)
        async with self._write:
            try:
                if why.action:
                    # Marked first: the Job controller then knows the scheduler decided this loss and acts on the
                    # Job's policy at once rather than wait for the gang to heal.
                    mark = {"metadata": {"annotations": {EVICTED_BY_ANNOTATION: why.reason or why.action}}}
                    await self.client.patch(PODS, name, mark, namespace)
                await self.client.evict(namespace, name)
                self.metrics.evictions.inc()
                self.metrics.evictions_by.labels(why.action or "unknown", why.queue).inc()
                self.evicted(key, why.action)
                log.info("evicted %s%s", key, f": {why.reason}" if why.reason else "")
            except NotFound:
                return
            except ApiError as exc:
                log.warning("eviction of %s failed: %s", key, exc)
                return
        self._record_eviction(namespace, name, why)

    def _record_eviction(self, namespace: str, name: str, why: Eviction) -> None:
        """Volcano's evictor's Events: a Warning `Evict` on the pod ("Pod is evicted, because of …") and a Normal
        `Evict` on its PodGroup with the reason; here the reason names the gang the room is for."""
        if not why.reason:
            return
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "uid": why.uid}}
        self.recorder.record(pod, "Warning", "Evict", f"Pod is evicted, because of {why.reason}")
        if why.podgroup:
            pg_namespace, _, pg_name = why.podgroup.partition("/")
            stored = self.state.store("PodGroup").get(why.podgroup) or {}
            ref = {"apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind,
                   "metadata": {"name": pg_name, "namespace": pg_namespace, "uid": uid_of(stored)}}
            self.recorder.record(ref, "Normal", "Evict", why.reason)

    async def _write_status(self, outcome: Outcome) -> None:
        kinds = {"PodGroup": PODGROUPS, "Queue": QUEUES}
        writes = []
        for kind, key, status in outcome.status_writes:
            namespace, _, name = key.rpartition("/")
            writes.append(self._patch_status(kinds[kind], name, namespace or None, status,
                                             self._started(key) if kind == "PodGroup" else None))
        for name, computed in outcome.queues.items():
            self.metrics.observe_queue(name, outcome.dims, computed)
        self.metrics.queue_jobs.set(outcome.queue_jobs)
        await asyncio.gather(*writes)
        self.metrics.time_to_running.retain(self.state.snapshot.podgroups)

    def _started(self, key: str) -> Callable[[dict[str, Any]], None]:
        """Once a PodGroup's status is written: if it says Running over a stored phase that did not, this is where
        the leader learns the gang runs; observe the time since its creation."""
        stored = self.state.store("PodGroup").get(key) or {}
        was = (stored.get("status") or {}).get("phase")
        pg = self.state.snapshot.podgroups.get(key)

        def written(status: dict[str, Any]) -> None:
            if status.get("phase") == "Running" and was != "Running" and pg is not None and pg.creation:
                now = time.time()
                self.metrics.time_to_running.observe(key, uid_of(stored), pg.queue, pg.creation, now)
                self.on_running(key, pg.queue, pg.creation, now)

        return written

    def _record_events(self, outcome: Outcome) -> None:
        """The session already chose and paced these; the recorder writes them in the background."""
        for key, uid, type_, reason, message in outcome.events:
            namespace, _, name = key.partition("/")
            ref = {
                "apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind,
                "metadata": {"name": name, "namespace": namespace, "uid": uid},
            }
            self.recorder.record(ref, type_, reason, message)

    async def _patch_status(self, res: Any, name: str, namespace: str | None, status: dict[str, Any],
                            written: Callable[[dict[str, Any]], None] | None = None) -> None:
        async with self._write:
            try:
                await self.client.patch_status(res, name, {"status": status}, namespace)
                if written is not None:
                    written(status)
            except NotFound:
                pass
            except ApiError as exc:
                log.warning("status of %s %s/%s not written: %s", res.kind, namespace or "", name, exc)

    def requeue_pending(self) -> None:
        """A term begins (start, restart after a crash, a Lease won): kube-scheduler has set aside every gang
        member whose filter or bind met no extender, and would retry them only at its unschedulable-queue flush
        (60 s). Count every unbound member as waiting, so each is touched as soon as its gang has a plan."""
        for gang in self.state.gang_members:
            self.wait_for_plan(gang)

    def wait_for_plan(self, gang: str) -> None:
        """Every member of `gang` not yet on a node is touched once the gang has a plan (`_requeue`)."""
        pods = self.state.snapshot.pods
        for key in self.state.gang_members.get(gang, ()):
            pod = pods.get(key)
            if pod is not None and not pod.node_name and pod.phase == "Pending":
                self.waiting.add(key)

    async def _requeue(self) -> None:
        """kube-scheduler keeps a pod it found unschedulable aside until the pod changes; once its gang has a
        plan, touch the pod so it comes back at once instead of after the unschedulable-queue flush. Members of
        gangs already partly bound (a crash between a gang's Bindings) go first: they hold room for nothing."""
        ready = [key for key in self.waiting if self.plan.node_for(key) is not None]
        for key in ready:
            self.waiting.discard(key)
        ready.sort(key=lambda k: (self.state.bound_members(self.plan.gang_of_pod.get(k, "")) == 0, k))
        await asyncio.gather(*(self._touch(key) for key in ready))

    async def _touch(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        # A value the pod has never held: a patch that changes nothing is no event, and kube-scheduler would keep the
        # pod aside. Plan versions restart with each process, so a restarted leader's first plan would write the
        # version its predecessor last wrote (seen: two members of a gang parked at bind when the service died kept
        # aside after the restart, until its permit timed out).
        patch = {"metadata": {"annotations": {PLANNED_ANNOTATION: f"{self._term_id}.{self.plan.version}"}}}
        async with self._write:
            try:
                await self.client.patch(PODS, name, patch, namespace)
            except ApiError as exc:
                log.debug("could not requeue %s: %s", key, exc)
