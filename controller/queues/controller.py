"""The Queue controller: state (Open / Closing / Closed) and the standing queues.

Mirrors `pkg/controllers/queue/*.go`: a queue is synced when it appears and whenever a PodGroup enters or leaves
it; OpenQueue / CloseQueue Commands (`commands.py`) arrive here as actions. Like Volcano since v1.11 it persists
only `status.state` (the per-phase PodGroup counters stay unset; `lapilli queue list` counts PodGroups itself,
as vcctl does): writing counters on every PodGroup phase change would cost a Queue status write, fanned out to
every Queue watcher, per PodGroup transition. Writes are merge patches, so the scheduler's `status.allocated`
is never overwritten. `root` and `default` are created when missing (Volcano's scheduler does this at start).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any, Final

from controller.context import Context
from controller.queues.state import needs_root_parent, next_state, status_patch
from lapilli.api import Action
from lapilli.api.constants import DEFAULT_QUEUE, QUEUE_KIND, ROOT_QUEUE, SCHEDULING_API_VERSION
from lapilli.cluster import Event as WatchEvent
from lapilli.cluster import RateLimiter, WorkQueue, run_worker
from lapilli.kube import REQUEST_ERRORS, AlreadyExists, NotFound
from lapilli.kube.resources import QUEUES
from lapilli.meta import name_of

log = logging.getLogger(__name__)

STANDING: Final = (
    (ROOT_QUEUE, {"weight": 1, "reclaimable": False}),
    (DEFAULT_QUEUE, {"weight": 1, "reclaimable": True}),
)
_EVENTS: Final = {Action.OPEN_QUEUE: "Open queue succeed", Action.CLOSE_QUEUE: "Close queue succeed"}
_RETRYABLE: Final = REQUEST_ERRORS


def _queue_of(pg: Mapping[str, Any] | None) -> str | None:
    return str(((pg or {}).get("spec") or {}).get("queue") or DEFAULT_QUEUE) if pg is not None else None


class QueueController:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.queue: WorkQueue[str] = WorkQueue(RateLimiter(0.2, 30.0))  # a failed sync: 0.2 s doubling to 30 s
        self._actions: dict[str, list[Action]] = {}

    def submit(self, name: str, action: Action = Action.SYNC_QUEUE) -> None:
        actions = self._actions.setdefault(name, [])
        if action not in actions:
            actions.append(action)
        self.queue.add(name)

    def on_queue(self, event: WatchEvent) -> None:
        name = name_of(event.obj)
        if event.type == "DELETED":
            self._actions.pop(name, None)
            return
        status = event.obj.get("status") or {}
        if event.type == "ADDED" or not status.get("state") or needs_root_parent(event.obj):
            self.submit(name)

    def on_podgroup(self, event: WatchEvent) -> None:
        now, before = _queue_of(event.obj), _queue_of(event.old)
        if event.type != "MODIFIED" or now != before:
            for name in {n for n in (now, before) if n}:
                self.submit(name)

    async def run_worker(self) -> None:
        await run_worker(self.queue, self._process, name="queue", retried=self.ctx.metrics.retried("queues"))

    async def _process(self, name: str) -> None:
        actions = self._actions.pop(name, [])
        done = 0
        try:
            for action in actions:
                await self._execute(name, action)
                done += 1
        except Exception:
            # The failed action and those after it wait for the retry, ahead of anything queued since.
            later = self._actions.get(name, [])
            self._actions[name] = [*actions[done:], *(a for a in later if a not in actions[done:])]
            raise

    async def _execute(self, name: str, action: Action) -> None:
        queue = self.ctx.queues.get(name)
        if queue is None:
            return
        if needs_root_parent(queue):
            queue = await self.ctx.client.patch(QUEUES, name, {"spec": {"parent": ROOT_QUEUE}})
            self.ctx.queues.wrote(queue)
        status = queue.get("status") or {}
        state = next_state(str(status.get("state") or ""), action, self.ctx.podgroups.count("queue", name))
        patch = status_patch(status, state)
        if patch is not None:
            self.ctx.queues.wrote(await self.ctx.client.patch_status(QUEUES, name, {"status": patch}))
        if action in _EVENTS and "state" in (patch or {}):
            self.ctx.recorder.record(queue, "Normal", action.value, _EVENTS[action])

    async def ensure_standing_queues(self) -> None:
        """`root` and `default` exist (retried until the API server accepts them)."""
        retries: RateLimiter[str] = RateLimiter(0.5, 30.0)  # 0.5 s doubling to 30 s
        for name, spec in STANDING:  # in order: root before default
            await retries.until(name, functools.partial(self._ensure_queue, name, spec))

    async def _ensure_queue(self, name: str, spec: dict[str, Any]) -> bool:
        body = {"apiVersion": SCHEDULING_API_VERSION, "kind": QUEUE_KIND, "metadata": {"name": name}, "spec": spec}
        try:
            await self.ctx.client.get(QUEUES, name)
            return True
        except NotFound:
            pass
        except _RETRYABLE as exc:
            log.warning("cannot read queue %s yet (%s)", name, exc)
            return False
        try:
            await self.ctx.client.create(QUEUES, body)
            log.info("created the standing queue %s", name)
        except AlreadyExists:
            pass
        except _RETRYABLE as exc:
            log.warning("cannot create queue %s yet (%s)", name, exc)
            return False
        return True
