"""Commands (bus.volcano.sh/v1alpha1): suspend / resume a Job, open / close a Queue — each at most once.

Mirrors `processNextCommand` of the Job and Queue controllers (reference §1.4): the Command is deleted
*first* — whoever deletes it owns it, so a second replica or a restarted controller never runs it again — then
the Job gets event `CommandIssued` ("Start to execute command <action>, and clean it up to make sure executed
not more than once.") and a request carrying the action; a Queue gets the action on its work queue. A Command
whose target is neither a Volcano Job nor a Queue is left for whoever understands it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from controller.context import Context
from controller.jobs.controller import JobController
from controller.jobs.requests import Request
from controller.queues.controller import QueueController
from lapilli.api import Action, Event, JobEvent
from lapilli.api.constants import BATCH_API_VERSION, JOB_KIND, QUEUE_KIND, SCHEDULING_API_VERSION
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter, WorkQueue, run_worker
from lapilli.kube import Conflict, NotFound
from lapilli.kube.resources import COMMANDS, VC_JOBS
from lapilli.meta import key_of, name_of, namespace_of, uid_of

log = logging.getLogger(__name__)

_JOB_READS: Final = 5  # reads of a Job the watch has not shown yet, before its Command is given up


def command_target(cmd: Mapping[str, Any]) -> tuple[Literal["job", "queue"], str, str] | None:
    """("job" | "queue", target name, target uid) for the Commands the controllers execute."""
    target = cmd.get("target") or {}
    api_version, kind = target.get("apiVersion"), target.get("kind")
    if (api_version, kind) == (BATCH_API_VERSION, JOB_KIND):
        return "job", str(target.get("name") or ""), str(target.get("uid") or "")
    if (api_version, kind) == (SCHEDULING_API_VERSION, QUEUE_KIND):
        return "queue", str(target.get("name") or ""), str(target.get("uid") or "")
    return None


def command_action(cmd: Mapping[str, Any]) -> Action | None:
    try:
        return Action(str(cmd.get("action") or ""))
    except ValueError:
        return None


@dataclass(slots=True)
class _Work:
    """A Command being executed: taken (deleted) first, then, for a Job, issued once the Job is read."""

    cmd: Mapping[str, Any]
    taken: bool = False
    dispatched: bool = False
    job: Request | None = None  # the request for the Job, until it is issued


class CommandRouter:
    """Commands as items of one rate-limited work queue (keyed by the Command's uid): a try that fails is queued
    again after the queue's backoff, 0.2 s doubling to 30 s, whether it was taking the Command, reading its Job or
    a bug; each retry resumes at the step that failed."""

    def __init__(self, ctx: Context, jobs: JobController, queues: QueueController) -> None:
        self.ctx, self.jobs, self.queues = ctx, jobs, queues
        self.queue: WorkQueue[str] = WorkQueue(RateLimiter(0.2, 30.0))
        self._work: dict[str, _Work] = {}
        self.taken = 0

    def on_command(self, event: WatchEvent) -> None:
        if event.type != "DELETED" and command_target(event.obj) is not None:
            key = uid_of(event.obj) or key_of(event.obj)
            self._work.setdefault(key, _Work(event.obj))
            self.queue.add(key)

    async def run_worker(self) -> None:
        await run_worker(self.queue, self._process, name="command", retried=self.ctx.metrics.retried("commands"))

    def _finish(self, key: str) -> None:
        self._work.pop(key, None)
        self.queue.forget(key)

    async def _process(self, key: str) -> None:
        work = self._work.get(key)
        if work is None:
            return
        if not work.taken and not await self._take(key, work):
            return
        if not work.dispatched:
            work.job = self._dispatch(work.cmd)
            work.dispatched = True
        if work.job is not None:
            await self._issue(work.cmd, work.job, self.queue.num_requeues(key))
        self._finish(key)

    async def _take(self, key: str, work: _Work) -> bool:
        """Delete the Command (a refused delete raises: the worker retries it); False when it is not ours."""
        cmd = work.cmd
        try:
            await self.ctx.client.delete(COMMANDS, name_of(cmd), namespace_of(cmd), uid=uid_of(cmd) or None)
        except (NotFound, Conflict):
            self._finish(key)
            return False  # taken by someone else (or re-created under the same name): not ours to run
        work.taken = True
        self.queue.forget(key)  # reading the Job starts its own count of retries
        self.taken += 1
        return True

    def _dispatch(self, cmd: Mapping[str, Any]) -> Request | None:
        """Route a taken Command: a Queue's action goes to its controller now; for a Job, the request to issue."""
        found, action = command_target(cmd), command_action(cmd)
        if found is None or action is None:
            log.warning("command %s: action %r is not one Lapilli executes; dropped", name_of(cmd), cmd.get("action"))
            return None
        kind, name, _uid = found
        self.ctx.metrics.commands.labels(action.value).inc()
        if kind == "queue":
            self.queues.submit(name, action)
            return None
        return Request(namespace_of(cmd), name, event=Event.COMMAND_ISSUED, action=action)

    async def _issue(self, cmd: Mapping[str, Any], request: Request, failed_reads: int) -> None:
        """Tell the Job. A Job just created may not have reached our watch yet: the API server is asked (a refused
        read raises, and the worker retries) until `_JOB_READS` reads have failed, then the Command is given up."""
        namespace, name, uid = request.namespace, request.job_name, (command_target(cmd) or ("", "", ""))[2]
        job = self.ctx.jobs.get(request.key)
        if job is None and failed_reads < _JOB_READS:
            try:
                job = await self.ctx.client.get(VC_JOBS, name, namespace)
            except NotFound:
                pass
            else:
                self.ctx.jobs.wrote(job)
        if job is None or (uid and uid_of(job) != uid):
            log.info("command %s: Job %s/%s (uid %s) no longer exists", name_of(cmd), namespace, name, uid)
            return
        message = (f"Start to execute command {request.action}, and clean it up to make sure executed "
                   "not more than once.")
        self.ctx.recorder.record(job, "Normal", JobEvent.COMMAND_ISSUED.value, message)
        self.jobs.submit(request)
