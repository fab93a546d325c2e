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
from lapilli.cluster import RateLimiter, WorkQueue
from lapilli.kube import REQUEST_ERRORS, Conflict, NotFound
from lapilli.kube.resources import COMMANDS, VC_JOBS
from lapilli.meta import key_of, name_of, namespace_of, uid_of

log = logging.getLogger(__name__)

_RETRYABLE: Final = REQUEST_ERRORS
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
    job: Request | None = None  # the request for the Job, until it is issued


class CommandRouter:
    """Commands as items of one rate-limited work queue (keyed by the Command's uid): a try that fails is queued
    again after the queue's backoff, 0.2 s doubling to 30 s, whether it was taking the Command or reading its Job."""

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
        while True:
            key = await self.queue.get()
            try:
                await self._process(key)
            except Exception:
                log.exception("command %s: unexpected error", key)
                self._finish(key)
            finally:
                self.queue.done(key)

    def _finish(self, key: str) -> None:
        self._work.pop(key, None)
        self.queue.forget(key)

    async def _process(self, key: str) -> None:
        work = self._work.get(key)
        if work is None:
            return
        if not work.taken:
            if not await self._take(key, work):
                return
            work.job = self._dispatch(work.cmd)
        if work.job is not None and not await self._issue(key, work.cmd, work.job):
            return  # queued again: the Job could not be read yet
        self._finish(key)

    async def _take(self, key: str, work: _Work) -> bool:
        cmd = work.cmd
        try:
            await self.ctx.client.delete(COMMANDS, name_of(cmd), namespace_of(cmd), uid=uid_of(cmd) or None)
        except (NotFound, Conflict):
            self._finish(key)
            return False  # taken by someone else (or re-created under the same name): not ours to run
        except _RETRYABLE as exc:
            delay = self.queue.add_rate_limited(key)
            log.warning("command %s: cannot take it (%s); retrying in %.1fs", key_of(cmd), exc, delay)
            return False
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

    async def _issue(self, key: str, cmd: Mapping[str, Any], request: Request) -> bool:
        """Tell the Job (False: queued again to read it). A Job just created may not have reached our watch yet:
        the API server is asked, up to `_JOB_READS` times, before the Command is given up."""
        namespace, name, uid = request.namespace, request.job_name, (command_target(cmd) or ("", "", ""))[2]
        job = self.ctx.jobs.get(request.key)
        if job is None and self.queue.num_requeues(key) < _JOB_READS:
            try:
                job = await self.ctx.client.get(VC_JOBS, name, namespace)
            except NotFound:
                pass
            except _RETRYABLE as exc:  # the Command is already ours: try hard not to drop it
                log.warning("command for Job %s/%s: cannot read the Job (%s)", namespace, name, exc)
                self.queue.add_rate_limited(key)
                return False
            else:
                self.ctx.jobs.wrote(job)
        if job is None or (uid and uid_of(job) != uid):
            log.info("command %s: Job %s/%s (uid %s) no longer exists", name_of(cmd), namespace, name, uid)
            return True
        message = (f"Start to execute command {request.action}, and clean it up to make sure executed "
                   "not more than once.")
        self.ctx.recorder.record(job, "Normal", JobEvent.COMMAND_ISSUED.value, message)
        self.jobs.submit(request)
        return True
