"""The explanation on the PodGroup itself, where `kubectl describe pg` shows it. (The per-queue job metrics follow
the session itself: `metrics.QueueJobs`, `metrics.TimeToRunning`.)

Every `interval_s` (`--why-interval`, 30 s) the leader explains the PodGroups that wait
(`extender.engine.explain` over the session loop's own snapshot and conf) and writes one condition of Lapilli's own
type, `lapilli.io/Why`: status True while the gang waits, False once it runs; reason = the first reason's kind;
message = the reasons, most important first. A closed queue names who closed it as `lapilli job why` does: the
CloseQueue Event if the service may list Events in `default`, else the field manager that wrote the Queue's state.
Volcano's `Unschedulable` / `Scheduled` conditions and events are left as the session writes them. A condition is
rewritten only when its status or its reason kinds (all of them, in order) change, not when a number in its message
moves (the message's numbers are as of that write; `lapilli job why` has today's), and no more often than the
session's events (`pacing.Pacer`'s bucket per PodGroup).

The explanation runs in a worker thread of the verbs' process, once per interval and for at most `limit`
PodGroups (taken in turn: each pass starts after the last one it explained, so all of them get their condition).
It costs about one scheduling session of CPU (it runs the session's actions once more, recording), taken
in short GIL slices (the loop's switch interval is 0.2 ms): hence the long default interval. Running it in the
session process instead is the next step for large clusters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from extender.engine.conf import SchedulerConf
from extender.engine.explain import WHY_CONDITION, Context, Explanation, Kind, explain
from extender.engine.explain.closers import closed_by
from extender.engine.snapshot import Snapshot
from extender.service.pacing import Pacer
from lapilli.api.constants import QUEUE_KIND
from lapilli.kube import REQUEST_ERRORS, KubeClient
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import EVENTS, PODGROUPS
from lapilli.times import rfc3339

log = logging.getLogger("lapilli.extender")

CONDITION: Final = WHY_CONDITION
WAITING_PHASES: Final = frozenset({"", "Pending", "Inqueue", "Unknown"})
MESSAGE_REASONS: Final = 4  # reasons in the condition's message (the rest: `lapilli job why`)


def condition(explanation: Explanation) -> dict[str, str]:
    waiting = explanation.kind not in (Kind.RUNNING, Kind.STARTING)
    message = "; ".join(f"{i}. {r.message}" for i, r in enumerate(explanation.reasons[:MESSAGE_REASONS], 1))
    return {"type": CONDITION, "status": "True" if waiting else "False", "reason": str(explanation.kind),
            "message": message or explanation.phase}


def with_condition(current: list[Mapping[str, Any]], new: dict[str, str], stamp: str,
                   kinds_changed: bool = True) -> list[dict[str, Any]] | None:
    """The conditions list with `new` first (where the session's writer keeps it), or None if the stored condition
    of its type already says the same: same status and reason, and `kinds_changed` false (the reasons' kinds are
    those of the last write; a message whose numbers alone moved is not rewritten). Lapilli's own conditions
    (`lapilli.io/Why`, `lapilli.io/IdleGPU`) are all written so."""
    old = next((c for c in current if c.get("type") == new["type"]), None)
    if old is not None and all(old.get(k) == new[k] for k in ("status", "reason")) and (
            not kinds_changed or old.get("message") == new["message"]):
        return None
    kept = old.get("lastTransitionTime") if old is not None and old.get("status") == new["status"] else None
    return [{**new, "lastTransitionTime": kept or stamp}, *(dict(c) for c in current if c.get("type") != new["type"])]


class WhyLoop:
    def __init__(
        self, snapshot: Callable[[], Snapshot | None], conf: Callable[[], SchedulerConf],
        stored: Callable[[], Mapping[str, Mapping[str, Any]]], client: KubeClient,
        *, queues: Callable[[], Mapping[str, Mapping[str, Any]]] = lambda: {},
        interval_s: float = 30.0, limit: int = 200, is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        """`snapshot`: the session loop's cluster copy (None while not synced); `stored`, `queues`: PodGroups and
        Queues as last seen."""
        self.snapshot, self.conf, self.stored, self.queues, self.client = snapshot, conf, stored, queues, client
        self.interval_s, self.limit, self.is_leader = interval_s, limit, is_leader
        self.pacer = Pacer()
        self._kinds: dict[str, tuple[str, ...]] = {}  # PodGroup -> the reason kinds its condition was written with
        self._after = ""  # the last PodGroup explained: the next pass starts after it

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if not self.is_leader():
                continue
            try:
                await self.run_once()
            except Exception:
                log.exception("explaining waiting PodGroups failed; retrying next interval")

    def candidates(self, snap: Snapshot) -> list[str]:
        """Waiting PodGroups, and running ones whose condition still says they wait (to flip it)."""
        stored = self.stored()
        out = []
        for key, pg in sorted(snap.podgroups.items()):
            if pg.phase in WAITING_PHASES:
                out.append(key)
                continue
            conditions = ((stored.get(key) or {}).get("status") or {}).get("conditions") or []
            if any(c.get("type") == CONDITION and c.get("status") == "True" for c in conditions):
                out.append(key)
        if len(out) <= self.limit:
            return out
        start = next((i for i, key in enumerate(out) if key > self._after), 0)
        chosen = (out[start:] + out[:start])[: self.limit]
        self._after = chosen[-1]
        return sorted(chosen)

    async def closed_by(self) -> dict[str, str]:
        """Who closed each queue that is not Open (see the module docstring)."""
        queues = list(self.queues().values())
        if all(((q.get("status") or {}).get("state") or "Open") == "Open" for q in queues):
            return {}
        try:
            events = (await self.client.list(EVENTS, "default", field_selector=f"involvedObject.kind={QUEUE_KIND}")
                      ).items
        except REQUEST_ERRORS as exc:
            log.debug("Queue events not readable (%s); naming the Queue state's field manager instead", exc)
            events = []
        return closed_by(queues, events)

    async def run_once(self) -> int:
        """Explain, then write the conditions that changed and are due; returns how many were written."""
        snap = self.snapshot()
        if snap is None:
            return 0
        keys = self.candidates(snap)
        if not keys:
            return 0
        context = Context(queue_closed_by=await self.closed_by())
        explanations = await asyncio.to_thread(explain, snap, self.conf(), keys, context, time.time())
        stamp = rfc3339(time.time())
        now = time.monotonic()
        stored = self.stored()
        writes = []
        for key, answer in explanations.items():
            current = ((stored.get(key) or {}).get("status") or {}).get("conditions") or []
            new, kinds = condition(answer), tuple(str(r.kind) for r in answer.reasons)
            # Without a memory of the last write (a new leader) its message is compared instead.
            conditions = with_condition(current, new, stamp, self._kinds.get(key) != kinds)
            if conditions is None:
                continue
            if self.pacer.event_due(key, CONDITION, now, lambda n=new: n["message"]) is None:  # type: ignore[misc]
                continue
            self._kinds[key] = kinds
            writes.append(self._write(key, conditions))
        self.pacer.retain(snap.podgroups, ())
        self._kinds = {k: v for k, v in self._kinds.items() if k in snap.podgroups}
        await asyncio.gather(*writes)
        return len(writes)

    async def _write(self, key: str, conditions: list[dict[str, Any]]) -> None:
        await write_conditions(self.client, key, conditions, "why-condition")


async def write_conditions(client: KubeClient, key: str, conditions: list[dict[str, Any]], what: str) -> None:
    """Replace PodGroup `key`'s conditions; one gone meanwhile is fine, another failure is logged (the next pass
    writes again)."""
    namespace, _, name = key.partition("/")
    with contextlib.suppress(NotFound):
        try:
            await client.patch_status(PODGROUPS, name, {"status": {"conditions": conditions}}, namespace)
        except REQUEST_ERRORS as exc:
            log.warning("%s of PodGroup %s not written: %s", what, key, exc)
