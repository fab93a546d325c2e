"""The controllers' view of the cluster: one `Store` per kind, fed by watch events *and* by our own writes.

A reflector's store lags behind what the controller just did: a Job status written a millisecond ago, a pod
just deleted. Acting on that stale view repeats actions (a second `retryCount++`, pods recreated under a name
that is still terminating). client-go controllers paper over it with expectations; here the answer of every
write is fed back into the store and the newest resourceVersion wins, so a late watch event can never roll the
view back. Deletions we issued are remembered by UID (a tombstone) until the watch confirms them: a deleted
object either disappears from the view at once (`linger=False`, e.g. a PodGroup that is recreated right
away) or stays visible as *terminating* (`linger=True`, pods: their name is still taken).

Secondary indexes (pods by Job, PodGroups by queue) are kept incrementally. Everything here is synchronous and
does no I/O; it runs on the event loop between awaits.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from lapilli.meta import MutableObj, is_deleting, key_of, revision, uid_of

IndexFn = Callable[[Mapping[str, Any]], str | None]

_TOMBSTONE_TTL_S: Final = 600.0  # a confirmation that never comes (missed watch event) is forgotten eventually


class Store:
    """Objects of one kind by key; newest resourceVersion wins; deletions we made are tombstoned by UID."""

    def __init__(
        self, indexes: Mapping[str, IndexFn] | None = None, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._objects: dict[str, MutableObj] = {}
        self._index_fns = dict(indexes or {})
        self._indexes: dict[str, dict[str, set[str]]] = {name: {} for name in self._index_fns}
        self._dead: dict[str, float] = {}  # uid -> when we deleted it
        self._clock = clock

    # -- reads ---------------------------------------------------------------------------------------------

    def get(self, key: str) -> MutableObj | None:
        return self._objects.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._objects

    def __len__(self) -> int:
        return len(self._objects)

    def values(self) -> Iterator[MutableObj]:
        return iter(list(self._objects.values()))

    def by_index(self, index: str, value: str) -> list[MutableObj]:
        keys = self._indexes[index].get(value, ())
        return [self._objects[k] for k in sorted(keys) if k in self._objects]

    def count(self, index: str, value: str) -> int:
        # Every indexed key is in view (`_put` and `_remove` keep both together): the Queue controller counts a
        # queue's PodGroups on each PodGroup that enters or leaves it, which must not walk them all.
        return len(self._indexes[index].get(value, ()))

    def deleting(self, obj: Mapping[str, Any]) -> bool:
        """Being deleted: it carries a deletionTimestamp, or we deleted it and the watch has not confirmed yet."""
        return is_deleting(obj) or uid_of(obj) in self._dead

    # -- writes from the watch -----------------------------------------------------------------------------

    def observe(self, event_type: str, obj: MutableObj) -> MutableObj | None:
        """Apply one watch event; returns the object it replaced (None if none, or if the event was stale)."""
        key = key_of(obj)
        current = self._objects.get(key)
        if event_type == "DELETED":
            # Tombstoned, not forgotten: the answer to one of our writes that was in flight when the object went
            # (a Job status update racing its deletion) must not bring it back into view for good.
            if uid := uid_of(obj):
                self._expire()
                self._dead[uid] = self._clock()
            if current is not None and uid_of(current) == uid_of(obj):
                self._remove(key, current)
                return current
            return None
        return self._put(key, obj, current)

    # -- writes from our own requests ----------------------------------------------------------------------

    def wrote(self, obj: MutableObj) -> None:
        """The API server's answer to our create/update/patch: at least as new as anything seen so far."""
        key = key_of(obj)
        self._put(key, obj, self._objects.get(key))

    def deleted(self, obj: Mapping[str, Any], *, linger: bool) -> None:
        """We deleted `obj`. `linger`: keep it visible (as `deleting`) until the watch says it is gone."""
        uid = uid_of(obj)
        if uid:
            self._expire()
            self._dead[uid] = self._clock()
        key = key_of(obj)
        current = self._objects.get(key)
        if not linger and current is not None and uid_of(current) == uid:
            self._remove(key, current)

    # -- internals -----------------------------------------------------------------------------------------

    def _put(self, key: str, obj: MutableObj, current: MutableObj | None) -> MutableObj | None:
        uid = uid_of(obj)
        if current is None and uid in self._dead and key not in self._objects:
            # A late event about an object we deleted and already dropped from view: ignore it.
            return None
        if current is not None and revision(current) > revision(obj) >= 0:
            return None  # older than what we have (our own write got here first)
        if current is not None:
            self._unindex(key, current)
        self._objects[key] = obj
        self._index(key, obj)
        return current

    def _remove(self, key: str, current: MutableObj) -> None:
        self._unindex(key, current)
        del self._objects[key]

    def _index(self, key: str, obj: MutableObj) -> None:
        for name, fn in self._index_fns.items():
            value = fn(obj)
            if value is not None:
                self._indexes[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: MutableObj) -> None:
        for name, fn in self._index_fns.items():
            value = fn(obj)
            if value is not None and (keys := self._indexes[name].get(value)) is not None:
                keys.discard(key)
                if not keys:
                    del self._indexes[name][value]

    def _expire(self) -> None:
        if len(self._dead) < 1024:
            return
        horizon = self._clock() - _TOMBSTONE_TTL_S
        for uid in [u for u, at in self._dead.items() if at < horizon]:
            del self._dead[uid]
