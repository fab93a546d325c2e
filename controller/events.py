"""Kubernetes Events for what the controllers do, written in the background (client-go's EventRecorder).

An Event is named `<object>.<unix-nanos in hex>` as client-go names them (vcctl's `job view` finds a Job's
events by that prefix). A repeat of the same (object, type, reason, message) within ten minutes bumps the
existing Event's `count` and `lastTimestamp` instead of creating another, as client-go's correlator does.
Writes never block a controller: they run as tasks behind a small semaphore and failures are only logged —
an Event is a courtesy, not state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final, Literal

import aiohttp

from lapilli.kube import ApiError, KubeClient
from lapilli.kube.resources import EVENTS

log = logging.getLogger(__name__)

COMPONENT: Final = "lapilli-controller"
_AGGREGATE_WINDOW_S: Final = 600.0
_REMEMBERED: Final = 4096

EventType = Literal["Normal", "Warning"]


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def event_object(obj: Mapping[str, Any], type_: EventType, reason: str, message: str, now: float) -> dict[str, Any]:
    """A fresh core/v1 Event about `obj` (cluster-scoped objects' events live in `default`, as client-go's)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    involved = {
        "apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "name": meta.get("name", ""),
        "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", ""),
    }
    if meta.get("namespace"):
        involved["namespace"] = meta["namespace"]
    stamp = _rfc3339(now)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.get('name', '')}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": involved, "reason": reason, "message": message, "type": type_,
        "source": {"component": COMPONENT}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "reportingComponent": COMPONENT, "reportingInstance": COMPONENT,
    }


class EventRecorder:
    def __init__(self, client: KubeClient, *, concurrency: int = 8) -> None:
        self._client = client
        self._gate = asyncio.Semaphore(concurrency)
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[str, str, int, float]] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self.written = 0

    def record(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
        """Queue one Event about `obj`; returns at once."""
        task = asyncio.get_running_loop().create_task(self._write(obj, type_, reason, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Wait for the Events queued so far (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _write(self, obj: Mapping[str, Any], type_: EventType, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("uid") or meta.get("name")), type_, reason, message)
        now = time.time()
        async with self._gate:
            try:
                previous = self._seen.get(key)
                if previous is not None and now - previous[3] < _AGGREGATE_WINDOW_S:
                    name, namespace, count, _ = previous
                    patch = {"count": count + 1, "lastTimestamp": _rfc3339(now)}
                    await self._client.patch(EVENTS, name, patch, namespace)
                    self._remember(key, (name, namespace, count + 1, now))
                else:
                    created = await self._client.create(EVENTS, event_object(obj, type_, reason, message, now))
                    cm = created["metadata"]
                    self._remember(key, (cm["name"], cm["namespace"], 1, now))
                self.written += 1
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as exc:
                self._seen.pop(key, None)
                log.debug("event %s %s on %s not written: %s", type_, reason, meta.get("name"), exc)

    def _remember(self, key: tuple[str, str, str, str], value: tuple[str, str, int, float]) -> None:
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)
