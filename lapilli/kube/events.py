"""Kubernetes Events written in the background (client-go's EventRecorder), for every face that reports what it
does: the controllers as `lapilli-controller`, the scheduler extender as `volcano`.

An Event is named `<object>.<unix-nanos in hex>` as client-go names them (vcctl's `job view` finds a Job's
events by that prefix). A repeat of the same (object, type, reason, message) within ten minutes bumps the
existing Event's `count` and `lastTimestamp` instead of creating another, as client-go's correlator does; if that
Event is gone (the API server's event TTL, or someone deleted it) the repeat creates a fresh one.
Writes never block the caller: they run as tasks behind a small semaphore and failures are only logged —
an Event is a courtesy, not state. How often to record is the caller's business (the extender paces its
PodGroup events before they get here).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final, Literal

from lapilli.kube.client import REQUEST_ERRORS, KubeClient
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import EVENTS
from lapilli.meta import meta, name_of, namespace_of, resource_version, uid_of
from lapilli.times import rfc3339

log = logging.getLogger(__name__)

_AGGREGATE_WINDOW_S: Final = 600.0
REMEMBERED: Final = 4096

EventType = Literal["Normal", "Warning"]
_Key = tuple[str, str, str, str]


def event_object(
    obj: Mapping[str, Any], type_: EventType, reason: str, message: str, now: float, component: str
) -> dict[str, Any]:
    """A fresh core/v1 Event about `obj` (cluster-scoped objects' events live in `default`, as client-go's)."""
    namespace = namespace_of(obj) or "default"
    involved = {
        "apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "name": name_of(obj),
        "uid": uid_of(obj), "resourceVersion": resource_version(obj),
    }
    if namespace_of(obj):
        involved["namespace"] = namespace_of(obj)
    stamp = rfc3339(now)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name_of(obj)}.{time.time_ns():x}", "namespace": namespace},
        "involvedObject": involved, "reason": reason, "message": message, "type": type_,
        "source": {"component": component}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "reportingComponent": component, "reportingInstance": component,
    }


class EventRecorder:
    def __init__(
        self, client: KubeClient, component: str, *, concurrency: int = 8, remembered: int = REMEMBERED
    ) -> None:
        """`remembered` bounds the aggregation memory: a repeat of an event forgotten since creates a new Event,
        so it should exceed how many distinct events recur within the window."""
        self._client = client
        self.component = component
        self._gate = asyncio.Semaphore(concurrency)
        self._remembered = remembered
        self._seen: OrderedDict[_Key, tuple[str, str, int, float]] = OrderedDict()
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
        key = (uid_of(obj) or name_of(obj), type_, reason, message)
        now = time.time()
        async with self._gate:
            try:
                previous = self._seen.get(key)
                if previous is not None and now - previous[3] < _AGGREGATE_WINDOW_S:
                    name, namespace, count, _ = previous
                    patch = {"count": count + 1, "lastTimestamp": rfc3339(now)}
                    try:
                        await self._client.patch(EVENTS, name, patch, namespace)
                        self._remember(key, (name, namespace, count + 1, now))
                    except NotFound:
                        await self._create(key, obj, type_, reason, message, now)
                else:
                    await self._create(key, obj, type_, reason, message, now)
                self.written += 1
            except REQUEST_ERRORS as exc:
                self._seen.pop(key, None)
                log.debug("event %s %s on %s not written: %s", type_, reason, name_of(obj), exc)

    async def _create(
        self, key: _Key, obj: Mapping[str, Any], type_: EventType, reason: str, message: str, now: float
    ) -> None:
        event = event_object(obj, type_, reason, message, now, self.component)
        created = await self._client.create(EVENTS, event)
        cm = meta(created) or event["metadata"]
        self._remember(key, (cm["name"], cm["namespace"], 1, now))

    def _remember(self, key: _Key, value: tuple[str, str, int, float]) -> None:
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > self._remembered:
            self._seen.popitem(last=False)
