"""Commands (bus.volcano.sh/v1alpha1): suspend / resume a Job, open / close a Queue — each at most once.

Mirrors `processNextCommand` of the Job and Queue controllers (reference §1.4): the Command is deleted
*first* — whoever deletes it owns it, so a second replica or a restarted controller never runs it again — then
the Job gets event `CommandIssued` ("Start to execute command <action>, and clean it up to make sure executed
not more than once.") and a request carrying the action; a Queue gets the action on its work queue. A Command
whose target is neither a Volcano Job nor a Queue is left for whoever understands it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Final, Literal

import aiohttp

from controller.context import Context
from controller.jobs.controller import JobController
from controller.jobs.requests import Request
from controller.queues.controller import QueueController
from lapilli.api import Action, Event, JobEvent
from lapilli.api.constants import BATCH_API_VERSION, JOB_KIND, QUEUE_KIND, SCHEDULING_API_VERSION
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter
from lapilli.kube import ApiError, Conflict, NotFound
from lapilli.kube.resources import COMMANDS, VC_JOBS
from lapilli.meta import key_of, uid_of

log = logging.getLogger(__name__)

_RETRYABLE: Final = (ApiError, aiohttp.ClientError, OSError, TimeoutError)


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


class CommandRouter:
    def __init__(self, ctx: Context, jobs: JobController, queues: QueueController) -> None:
        self.ctx, self.jobs, self.queues = ctx, jobs, queues
        self._tasks: set[asyncio.Task[None]] = set()
        # Taking a Command, or reading its Job, is retried after 0.2 s doubling to 30 s.
        self._retries: RateLimiter[str] = RateLimiter(0.2, 30.0)
        self.taken = 0

    def on_command(self, event: WatchEvent) -> None:
        if event.type != "DELETED" and command_target(event.obj) is not None:
            task = asyncio.get_running_loop().create_task(self.take(event.obj))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def take(self, cmd: Mapping[str, Any]) -> None:
        meta, key = cmd["metadata"], f"command {key_of(cmd)}"
        while True:
            try:
                await self.ctx.client.delete(COMMANDS, meta["name"], meta["namespace"], uid=uid_of(cmd) or None)
                break
            except (NotFound, Conflict):
                self._retries.forget(key)
                return  # taken by someone else (or re-created under the same name): not ours to run
            except _RETRYABLE as exc:
                delay = self._retries.when(key)
                log.warning("%s: cannot take it (%s); retrying in %.1fs", key, exc, delay)
                await asyncio.sleep(delay)
        self._retries.forget(key)
        self.taken += 1
        await self._dispatch(cmd)

    async def _dispatch(self, cmd: Mapping[str, Any]) -> None:
        found, action = command_target(cmd), command_action(cmd)
        if found is None or action is None:
            log.warning("command %s: action %r is not one Lapilli executes; dropped", cmd["metadata"]["name"],
                        cmd.get("action"))
            return
        kind, name, uid = found
        self.ctx.metrics.commands.labels(action.value).inc()
        if kind == "queue":
            self.queues.submit(name, action)
            return
        namespace = cmd["metadata"]["namespace"]
        job = self.ctx.jobs.get(f"{namespace}/{name}") or await self._fetch_job(namespace, name)
        if job is None or (uid and uid_of(job) != uid):
            log.info("command %s: Job %s/%s (uid %s) no longer exists", cmd["metadata"]["name"], namespace, name, uid)
            return
        message = f"Start to execute command {action}, and clean it up to make sure executed not more than once."
        self.ctx.recorder.record(job, "Normal", JobEvent.COMMAND_ISSUED.value, message)
        self.jobs.submit(Request(namespace, name, event=Event.COMMAND_ISSUED, action=action))

    async def _fetch_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Job just created may not have reached our watch yet: ask the API server before giving up."""
        key = f"job {namespace}/{name}"
        try:
            while self._retries.num_requeues(key) < 5:
                try:
                    job = await self.ctx.client.get(VC_JOBS, name, namespace)
                except NotFound:
                    return None
                except _RETRYABLE as exc:  # the Command is already ours: try hard not to drop it
                    log.warning("command for Job %s/%s: cannot read the Job (%s)", namespace, name, exc)
                    await asyncio.sleep(self._retries.when(key))
                    continue
                self.ctx.jobs.wrote(job)
                return job
            return None
        finally:
            self._retries.forget(key)

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
