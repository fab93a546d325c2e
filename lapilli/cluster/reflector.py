"""A generic list-then-watch reflector over raw JSON objects (client-go's Reflector + a plain dict store).

Lists (paged), then watches from the list's resourceVersion with bookmarks and a randomised server-side
timeout, so a fleet of watchers does not reconnect in lock-step. When the server answers 410 Gone the
reflector re-lists and *diffs* the fresh list against its store, emitting synthetic ADDED / MODIFIED /
DELETED events, so handlers never miss a deletion that happened while the watch was down. Broken
connections are retried with jittered exponential back-off (0.5 s doubling to 5 s), reset as soon as the server
accepts a list or a watch again: after an outage the next drop is retried in 0.5 s, not after the back-off the
outage built up (resetting only when a watch ran to its server timeout left reflectors blind for up to 30 s).
The cap is 5 s, not client-go's 30 s: once kube-apiserver is back a reflector is back within seconds, and a
retry every 5 s from a few dozen reflectors is nothing to a server (an overloaded one answers 429 at once).

An `optional` reflector follows a resource that may not be served at all (a CRD not installed, e.g. HyperNodes on
a cluster without Volcano's network topology) or not readable (no RBAC rule for it yet): a 404 or 403 on its list
is logged once, the store is emptied (handlers see the deletions) and counts as synced, and the list is retried
every `ABSENT_RETRY_S` until the resource appears, so the rest of its owner never waits for it.

A `transform` (client-go's SetTransform) slims every object before it is stored or handed out (a listed one as its
page arrives): a store of 10,000 full Pods is ~1.5 million GC-tracked objects, and Python's full collections over it
stall the event loop for up to a second. A transform must keep `metadata.name`, `namespace`, `uid` and
`resourceVersion`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from lapilli import collector
from lapilli.cluster.workqueue import RateLimiter
from lapilli.kube.client import REQUEST_ERRORS, KubeClient
from lapilli.kube.errors import ApiError, Gone
from lapilli.kube.resources import Resource
from lapilli.meta import MutableObj, key_of, resource_version, uid_of
from lapilli.tasks import cancel_and_wait

log = logging.getLogger(__name__)

MAX_BACKOFF_S: Final = 5.0
ABSENT_RETRY_S: Final = 30.0

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class Event:
    """One change seen by a reflector. `old` is the stored object it replaced (None for a first sighting);
    `synthetic` marks events derived from a re-list diff rather than read from the watch stream."""

    type: EventType
    obj: MutableObj
    old: MutableObj | None = None
    synthetic: bool = False


class EventHandler(Protocol):
    """Called once per event, in order; may be a plain function or a coroutine function."""

    def __call__(self, event: Event, /) -> Awaitable[None] | None: ...


def diff(store: Mapping[str, MutableObj], items: Iterable[MutableObj]) -> tuple[dict[str, MutableObj], list[Event]]:
    """Compare a fresh list with the store: the new store and the synthetic events that lead to it.

    Unchanged objects (same resourceVersion) produce nothing. An object whose UID changed was deleted and
    re-created under the same name while we were not watching: that is a DELETED of the old one followed by an
    ADDED, not a MODIFIED, so handlers keyed by UID stay right. Deletions come first, then additions and
    updates in list order.
    """
    fresh: dict[str, MutableObj] = {}
    changes: list[Event] = []
    replaced: list[Event] = []
    for obj in items:
        key = key_of(obj)
        fresh[key] = obj
        old = store.get(key)
        if old is None:
            changes.append(Event("ADDED", obj, None, True))
        elif uid_of(old) and uid_of(obj) and uid_of(old) != uid_of(obj):
            replaced.append(Event("DELETED", old, old, True))
            changes.append(Event("ADDED", obj, None, True))
        elif resource_version(old) != resource_version(obj):
            changes.append(Event("MODIFIED", obj, old, True))
    gone = [Event("DELETED", old, old, True) for key, old in store.items() if key not in fresh]
    return fresh, gone + replaced + changes


def watch_timeout(min_s: int, rng: random.Random) -> int:
    """A server-side watch timeout in [min_s, 2*min_s), as client-go spreads reconnections."""
    return min_s + rng.randrange(max(1, min_s))


# What a broken connection or a refused request looks like; anything else is a bug and propagates.
_RETRYABLE = (*REQUEST_ERRORS, ValueError)


class Reflector:
    """Keeps `store` (key -> raw object) equal to the server's view of one resource and calls handlers."""

    def __init__(
        self, client: KubeClient, resource: Resource, *, namespace: str | None = None,
        label_selector: str | None = None, field_selector: str | None = None,
        handlers: Iterable[EventHandler] = (), page_size: int = 500, min_watch_timeout_s: int = 300,
        backoff: RateLimiter[str] | None = None, name: str | None = None, rng: random.Random | None = None,
        transform: Callable[[MutableObj], MutableObj] | None = None, optional: bool = False,
        stored: Callable[[MutableObj], MutableObj] | None = None,
    ) -> None:
        """`transform` slims each object before it is stored or handed out (see the module docstring); `stored`
        slims what the store keeps of each object once the handlers have seen it whole (`lapilli.meta.only_metadata`
        for an owner that reads only its handlers' records, never the store)."""
        self.client, self.resource, self.namespace = client, resource, namespace
        self.label_selector, self.field_selector = label_selector, field_selector
        self.handlers: list[EventHandler] = list(handlers)
        self.page_size, self.min_watch_timeout_s = page_size, min_watch_timeout_s
        self.name = name or resource.plural
        self.transform = transform
        self.stored = stored
        self._rng = rng or random.Random()
        # A broken connection is retried after 0.5 s doubling to 5 s, jittered by up to half (see the docstring).
        self._backoff: RateLimiter[str] = backoff or RateLimiter(0.5, MAX_BACKOFF_S, jitter=0.5, rng=self._rng)
        self.store: dict[str, MutableObj] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.restarts = 0  # watch or list re-established after an error or a 410 (exported as a metric)
        self.relists = 0
        self.error: ApiError | None = None  # the API server's last refusal, until it accepts a list or watch again
        self.optional = optional
        self.absent = False  # an optional resource the API server does not serve or lets us read (see the docstring)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"reflector-{self.name}")
        return self._task

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def run(self) -> None:
        """List, then watch forever; returns only when cancelled. A reflector restarted after `stop()` resumes
        watching from its last resourceVersion (re-listing only if the server says it is gone)."""
        need_list = not self.synced.is_set()
        while True:
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                await self._watch()
                self._backoff.forget(self.name)  # a watch that ran to its server-side timeout is healthy
            except Gone:
                log.info("%s: resourceVersion %s expired, re-listing", self.name, self.resource_version)
                self.restarts += 1
                need_list = True
            except _RETRYABLE as exc:
                if self.optional and isinstance(exc, ApiError) and exc.status in (403, 404):
                    await self._unavailable(exc)
                    need_list = True
                    continue
                self.restarts += 1
                if isinstance(exc, ApiError):
                    self.error = exc
                delay = self._backoff.when(self.name)
                log.warning("%s: %s: %s; retrying in %.1fs", self.name, type(exc).__name__, exc, delay)
                await asyncio.sleep(delay)

    async def _unavailable(self, exc: ApiError) -> None:
        """An optional resource the server does not serve (404) or will not show us (403): empty, synced, retried."""
        if not self.absent:
            why = "not served (is its CRD installed?)" if exc.status == 404 else "not readable (RBAC)"
            log.info("%s: %s; treated as empty, checked again every %.0fs", self.name, why, ABSENT_RETRY_S)
            self.absent = True
        gone, self.store = self.store, {}
        for old in gone.values():
            await self._dispatch(Event("DELETED", old, old, True))
        self.synced.set()
        await asyncio.sleep(ABSENT_RETRY_S)

    async def relist(self) -> None:
        """List everything and bring the store (and the handlers) up to date through a diff, with the cyclic
        collector paused (`lapilli.collector`): a list of 10,000 pods decoded with it running costs 8x its
        decoding."""
        with collector.paused():
            listed = await self.client.list(
                self.resource, self.namespace, label_selector=self.label_selector,
                field_selector=self.field_selector, page_size=self.page_size, transform=self.transform,
            )
            self.store, events = diff(self.store, listed.items)
            self.resource_version = listed.resource_version
            self.relists += 1
            if self.absent:
                log.info("%s: now served", self.name)
                self.absent = False
            self._healthy()
            for event in events:
                await self._dispatch(event)
            if self.stored is not None:
                self.store = {key: self.stored(obj) for key, obj in self.store.items()}
        self.synced.set()

    def _healthy(self) -> None:
        """The server accepted a list or a watch: the next failure is retried at the initial delay."""
        self._backoff.forget(self.name)
        self.error = None

    async def _watch(self) -> None:
        stream = self.client.watch(
            self.resource, self.namespace, resource_version=self.resource_version,
            timeout_seconds=watch_timeout(self.min_watch_timeout_s, self._rng), allow_bookmarks=True,
            label_selector=self.label_selector, field_selector=self.field_selector, on_open=self._healthy,
        )
        async for event in stream:
            obj = event.object
            self.resource_version = event.resource_version or self.resource_version
            if event.type == "BOOKMARK":
                continue
            if self.transform is not None:
                obj = self.transform(obj)
            key = key_of(obj)
            if event.type == "DELETED":
                await self._dispatch(Event("DELETED", obj, self.store.pop(key, None)))
            else:
                old = self.store.get(key)
                self.store[key] = obj
                await self._dispatch(Event("MODIFIED" if old is not None else "ADDED", obj, old))
                if self.stored is not None and self.store.get(key) is obj:
                    self.store[key] = self.stored(obj)

    async def _dispatch(self, event: Event) -> None:
        for handler in self.handlers:
            try:
                result = handler(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                # A handler bug must not stop the stream for every other handler; it is logged loudly.
                log.exception("%s: handler %r failed on %s %s", self.name, handler, event.type, key_of(event.obj))
