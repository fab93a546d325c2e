"""Deleting finished Jobs after `ttlSecondsAfterFinished` (Volcano's garbage collector, reference §3.6).

Only Completed, Failed and Terminated Jobs are collected (an Aborted Job may still be resumed); the clock starts
at `status.state.lastTransitionTime`. When the time comes the Job is re-read from the API server and deleted
with its UID as precondition, so a Job that was resumed or re-created meanwhile is spared. Volcano deletes
with Foreground propagation; that needs a garbage collector to ever finish, and not every cluster Lapilli
runs on has one, so the delete is a plain one and the Job controller deletes the children itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from controller.jobs.state import FINISHED
from lapilli.api import JobPhase
from lapilli.kube import REQUEST_ERRORS, Conflict, KubeClient, NotFound
from lapilli.kube.resources import VC_JOBS
from lapilli.meta import key_of, uid_of
from lapilli.times import parse_rfc3339

log = logging.getLogger(__name__)


def expires_at(job: Mapping[str, Any]) -> float | None:
    """Epoch seconds at which the Job may be deleted, or None if it is not (yet) subject to a TTL."""
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    state = (job.get("status") or {}).get("state") or {}
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        return None
    if state.get("phase") not in {p.value for p in FINISHED}:
        return None
    finished = state.get("lastTransitionTime")
    if not finished:
        return None
    return parse_rfc3339(str(finished)) + ttl


class TTLCollector:
    """One timer per finished Job with a TTL; `observe` every Job event."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.deleted = 0

    def observe(self, event_type: str, job: Mapping[str, Any]) -> None:
        key = key_of(job)
        if (old := self._timers.pop(key, None)) is not None:
            old.cancel()
        due = None if event_type == "DELETED" else expires_at(job)
        if due is None:
            return
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(max(0.0, due - time.time()), self._spawn, key, uid_of(job))

    def _spawn(self, key: str, uid: str) -> None:
        self._timers.pop(key, None)
        task = asyncio.get_running_loop().create_task(self._collect(key, uid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _collect(self, key: str, uid: str) -> None:
        namespace, name = key.split("/", 1)
        try:
            fresh = await self._client.get(VC_JOBS, name, namespace)
            due = expires_at(fresh)
            if uid_of(fresh) != uid or due is None:
                return
            if due > time.time():  # the Job moved on and finished again later: wait for the new deadline
                self.observe("MODIFIED", fresh)
                return
            await self._client.delete(VC_JOBS, name, namespace, uid=uid, propagation_policy="Background")
            self.deleted += 1
            phase = JobPhase(fresh["status"]["state"]["phase"])
            log.info("job %s: deleted %s after ttlSecondsAfterFinished", key, phase)
        except (NotFound, Conflict):
            return
        except REQUEST_ERRORS as exc:  # never lose the Job: retry later
            log.warning("job %s: TTL deletion failed (%s); retrying in 5s", key, exc)
            self._timers[key] = asyncio.get_running_loop().call_later(5.0, self._spawn, key, uid)

    def stop(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
