"""The gang permit cache held at the extender's bind verb (coscheduling's Permit, done where an extender can).

kube-scheduler binds asynchronously and keeps a pod's resources reserved in its cache while the bind call is
open, so the verb can *park* a gang member: the call waits. When parked plus already-bound members of the
PodGroup reach `minMember`, all parked members are bound together and every waiting call is answered. If the gang
does not complete before the permit timeout (shorter than the bind entry's `httpTimeout`), every parked sibling is
answered with the same error at once, so kube-scheduler un-reserves them all and retries later. A repeated bind
for a pod UID already parked waits on the same outcome (kube-scheduler may retry a timed-out call).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

log = logging.getLogger("lapilli.extender")

Binder = Callable[[str, str, str, str], Awaitable[str]]  # (namespace, name, node, uid) -> error text or ""


@dataclass(slots=True)
class _Parked:
    namespace: str
    name: str
    uid: str
    node: str
    outcome: asyncio.Future[str]


@dataclass(slots=True)
class _Gang:
    key: str
    min_member: int
    parked: dict[str, _Parked] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None


class PermitCache:
    def __init__(
        self,
        binder: Binder,
        timeout_s: float,
        on_timeout: Callable[[str, int, int], None] | None = None,
        on_bound: Callable[[str, int], None] | None = None,
        on_release: Callable[[str], None] | None = None,
    ) -> None:
        self._binder = binder
        self._on_release = on_release
        self.timeout_s = timeout_s
        self._on_timeout = on_timeout
        self._on_bound = on_bound
        self._gangs: dict[str, _Gang] = {}
        self._releases: set[asyncio.Task[None]] = set()

    def recheck(self, bound_of: Callable[[str], int]) -> None:
        """Release every gang whose bound members (as the cluster now shows them) plus parked ones reach
        minMember: a member parked while the watch had not yet shown its siblings bound must not wait for
        the timeout."""
        for entry in list(self._gangs.values()):
            if bound_of(entry.key) + len(entry.parked) >= entry.min_member:
                self._release(entry)

    def releasing(self) -> int:
        """Releases under way: gangs whose Bindings are sent and not all answered (a gang is partly bound in
        the cluster meanwhile, between its Bindings)."""
        return len(self._releases)

    def parked_count(self) -> int:
        return sum(len(g.parked) for g in self._gangs.values())

    def parked_on(self, node: str) -> list[str]:
        """Keys (ns/name) of the pods parked for `node`: their room is taken, though the cache shows them unbound."""
        return [f"{p.namespace}/{p.name}" for g in self._gangs.values() for p in g.parked.values() if p.node == node]

    def placements(self) -> dict[str, str]:
        """Every parked pod (ns/name) and its node: what kube-scheduler has assumed and not yet seen bound."""
        return {f"{p.namespace}/{p.name}": p.node for g in self._gangs.values() for p in g.parked.values()}

    def parked(self, gang: str) -> list[str]:
        return [f"{p.namespace}/{p.name}" for p in self._gangs[gang].parked.values()] if gang in self._gangs else []

    async def park(
        self, gang: str, min_member: int, bound: int, namespace: str, name: str, uid: str, node: str
    ) -> str:
        """Park one member; returns "" once it is bound, else the error to give kube-scheduler."""
        entry = self._gangs.get(gang)
        if entry is None:
            entry = _Gang(gang, min_member)
            self._gangs[gang] = entry
            entry.timer = asyncio.get_running_loop().call_later(self.timeout_s, self._expire, gang)
        parked = entry.parked.get(uid)
        if parked is None:
            parked = _Parked(namespace, name, uid, node, asyncio.get_running_loop().create_future())
            entry.parked[uid] = parked
            if bound + len(entry.parked) >= min_member:
                self._release(entry)
        return await asyncio.shield(parked.outcome)

    def _release(self, entry: _Gang) -> None:
        self._gangs.pop(entry.key, None)
        if entry.timer is not None:
            entry.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._bind_all(entry))
        self._releases.add(task)
        if self._on_release is not None:
            self._on_release(entry.key)
        task.add_done_callback(self._releases.discard)

    async def _bind_all(self, entry: _Gang) -> None:
        members = list(entry.parked.values())
        results = await asyncio.gather(
            *(self._binder(p.namespace, p.name, p.node, p.uid) for p in members), return_exceptions=True
        )
        bound = 0
        for member, result in zip(members, results, strict=True):
            error = f"binding failed: {result}" if isinstance(result, BaseException) else result
            bound += not error
            if not member.outcome.done():
                member.outcome.set_result(error)
        log.info("gang %s: bound %d/%d parked pods together", entry.key, bound, len(members))
        if self._on_bound is not None:
            self._on_bound(entry.key, bound)

    def _expire(self, gang: str) -> None:
        entry = self._gangs.pop(gang, None)
        if entry is None:
            return
        gathered = len(entry.parked)
        error = (
            f"gang {gang}: only {gathered} of {entry.min_member} pods reached bind within "
            f"{self.timeout_s:g}s; releasing them together"
        )
        for member in entry.parked.values():
            if not member.outcome.done():
                member.outcome.set_result(error)
        log.info("%s", error)
        if self._on_timeout is not None:
            self._on_timeout(gang, gathered, entry.min_member)

    def cancel_all(self, reason: str) -> None:
        """Answer every parked call with `reason` (shutdown): nothing is bound below minMember."""
        for gang in list(self._gangs):
            entry = self._gangs.pop(gang)
            if entry.timer is not None:
                entry.timer.cancel()
            for member in entry.parked.values():
                if not member.outcome.done():
                    member.outcome.set_result(reason)
