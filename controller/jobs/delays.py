"""Policy actions with a `timeout`: held back, then fired — unless what triggered them stopped being true.

Reference §3.1: one pending delayed action per pod and action (a repeat is ignored); a delay triggered by
PodPending is cancelled by any later non-PodPending event of that pod; delays triggered by PodFailed or
PodEvicted are cancelled when a pod of that name runs again (the one made in its place: Volcano's
`CleanPodDelayActionsIfNeed` matches names); once a user-facing action has executed, other delayed
actions of the same kind and scope are moot (job-level: the whole Job; RestartTask: the task; RestartPod: the
pod; RestartPartition: the partition). The bookkeeping is plain data; the timers are the event loop's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from controller.jobs.requests import Request
from lapilli.api import Action, Event

Fire = Callable[[Request], None]


@dataclass(slots=True)
class Pending:
    request: Request  # the triggering request, action already set
    timer: asyncio.TimerHandle | None


def _scope(req: Request, action: Action) -> tuple[str, ...]:
    if action == Action.RESTART_TASK:
        return (req.task,)
    if action == Action.RESTART_POD:
        return (req.task, req.pod_name)
    if action == Action.RESTART_PARTITION:
        return (req.task, req.partition)
    return ()


class DelayedActions:
    def __init__(self, fire: Fire) -> None:
        self._fire = fire
        self._pending: dict[tuple[str, str, Action], Pending] = {}  # (job key, pod, action)

    def __len__(self) -> int:
        return len(self._pending)

    def schedule(self, req: Request, action: Action, delay_s: float) -> bool:
        """Hold `action` for `delay_s`; False if the same pod already has this action pending."""
        key = (req.key, req.pod_name, action)
        if key in self._pending:
            return False
        delayed = req.with_action(action)
        timer = asyncio.get_running_loop().call_later(delay_s, self._expire, key)
        self._pending[key] = Pending(delayed, timer)
        return True

    def _expire(self, key: tuple[str, str, Action]) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None:
            self._fire(pending.request)

    def observe(self, req: Request) -> None:
        """A new request about a pod may make that pod's delayed actions moot. A PodPending delay belongs to one
        pod (its uid: a pod deleted and made again is another); a PodFailed or PodEvicted delay is cancelled once
        a pod of that name runs again — the member the Job controller made in its place (Volcano matches names)."""
        if not req.pod_uid:
            return
        for key, pending in list(self._pending.items()):
            held = pending.request
            if held.key != req.key or held.pod_name != req.pod_name:
                continue
            pending_gone = (held.event == Event.POD_PENDING and req.event != Event.POD_PENDING
                            and held.pod_uid == req.pod_uid)
            running_again = held.event in (Event.POD_FAILED, Event.POD_EVICTED) and req.event == Event.POD_RUNNING
            if pending_gone or running_again:
                self._cancel(key)

    def executed(self, req: Request, action: Action) -> None:
        """`action` just ran for `req`: drop delayed actions of the same kind it made pointless."""
        scope = _scope(req, action)
        for key, pending in list(self._pending.items()):
            if key[0] == req.key and key[2] == action and _scope(pending.request, action) == scope:
                self._cancel(key)

    def forget_job(self, job_key: str) -> None:
        for key in [k for k in self._pending if k[0] == job_key]:
            self._cancel(key)

    def _cancel(self, key: tuple[str, str, Action]) -> None:
        pending = self._pending.pop(key, None)
        if pending is not None and pending.timer is not None:
            pending.timer.cancel()
