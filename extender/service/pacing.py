"""How often a session's Queue and PodGroup status writes and PodGroup Events go out, remembered across sessions by
the process that runs them, so the outcome carries only what is due and the verbs' event loop only does the writes.

Sessions run up to five times a second; Volcano runs one a second (`--schedule-period`) and writes Queue and
PodGroup status and records PodGroup events once per session. Left unpaced, a busy cluster would patch every Queue
five times a second (each patch fanned out to every Queue watcher), a gang whose pods arrive or start one by one
would get a status write per pod, each overwritten by the next, and a gang that stays unschedulable would cost an
Event write per session, forever.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from extender.service.status import status_key

# Volcano's schedule period: Queue status at most this often per queue, a PodGroup event per reason no more often.
PERIOD_S: Final = 1.0
# The same event again no sooner than this: `kubectl describe` still tells a gang stuck for minutes from one stuck
# for seconds (count and lastTimestamp move every 30 s) while a stuck gang costs two writes a minute, not 300.
EVENT_REPEAT_S: Final = 30.0
# A changed message spends a token; tokens come back one per EVENT_REPEAT_S. A gang whose pods arrive one by one
# changes its message a few times within seconds ("1/1 tasks …", "2/2 …", "4/4 …") and each goes out at once, but
# a message that changes every session (fit errors over a busy cluster) settles at one write per 30 s like a
# repeat. client-go's spam filter is the same bucket per object (25 tokens, one per 5 minutes).
EVENT_BURST: Final = 5
# A PodGroup status sent is not sent again while the stored object is still the one it was computed over: the
# session diffs against its own watch, which trails the write by a moment, or by seconds on a busy machine, and
# would send the same status once more (a second API write and watch event for the PodGroup; ~2 % of plain pods in
# bench/verbs.py's case 2 got one, more when the service ran slow). A write whose echo never comes (it failed) goes
# again after this long.
ECHO_WAIT_S: Final = 10.0


@dataclass(slots=True)
class _Recorded:
    message: str
    at: float
    tokens: float
    refilled: float


class Pacer:
    def __init__(
        self, *, period_s: float = PERIOD_S, repeat_s: float = EVENT_REPEAT_S, burst: int = EVENT_BURST
    ) -> None:
        self.period_s, self.repeat_s, self.burst = period_s, repeat_s, burst
        self.echo_wait_s = ECHO_WAIT_S
        self._queues: dict[str, float] = {}
        self._podgroups: dict[str, float] = {}
        # PodGroup -> (what its last status write said, the stored resourceVersion it was computed over, when)
        self._sent: dict[str, tuple[Hashable, str, float]] = {}
        self._events: dict[tuple[str, str], _Recorded] = {}

    def queue_due(self, name: str, patch: Mapping[str, Any], now: float) -> bool:
        """Whether to write this Queue status patch now. A patch that sets `state` always goes (admission reads
        it); an `allocated` change waits out the period after the queue's last write. Nothing is lost by waiting:
        the next session diffs against the stored status again, and sessions run every period even when the
        cluster is quiet."""
        last = self._queues.get(name)
        if "state" not in patch and last is not None and now - last < self.period_s:
            return False
        self._queues[name] = now
        return True

    def podgroup_due(self, key: str, current: Mapping[str, Any], new: Mapping[str, Any], now: float,
                     stored_version: str = "") -> bool:
        """Whether to write this PodGroup status now. A new phase always goes (the Job controller, `kubectl get pg`
        and the verbs read it); a change of conditions or counters alone (a gang's Unschedulable message as its pods
        arrive, its `running` count as they start) waits out the period after the PodGroup's last write, as
        Volcano writes once per session: the write it saves would be overwritten within the period, and the next
        session diffs against the stored status again. `stored_version`: the resourceVersion `current` came with
        (see `in_flight`)."""
        last = self._podgroups.get(key)
        if new.get("phase") == current.get("phase") and last is not None and now - last < self.period_s:
            return False
        self._podgroups[key] = now
        self._sent[key] = (status_key(new), stored_version, now)
        return True

    def in_flight(self, key: str, new: Mapping[str, Any], stored_version: str, now: float) -> bool:
        """Whether `new` is what this PodGroup's last write already said, computed over the same stored object
        (its echo has not come back yet) less than ECHO_WAIT_S ago: not to be sent again."""
        sent = self._sent.get(key)
        return sent is not None and sent[:2] == (status_key(new), stored_version) and now - sent[2] < self.echo_wait_s

    def event_due(self, podgroup: str, reason: str, now: float, message: Callable[[], str]) -> str | None:
        """The message to record for `podgroup` now, or None while its last event for `reason` is recent enough.
        `message` is only called once the time allows an event (fit-error text costs a walk over the tasks)."""
        last = self._events.get((podgroup, reason))
        if last is None:
            text = message()
            self._events[(podgroup, reason)] = _Recorded(text, now, self.burst - 1.0, now)
            return text
        if now - last.at < self.period_s:
            return None
        last.tokens = min(float(self.burst), last.tokens + (now - last.refilled) / self.repeat_s)
        last.refilled = now
        if last.tokens < 1.0:
            return None
        text = message()
        if text == last.message and now - last.at < self.repeat_s:
            return None
        last.message, last.at = text, now
        last.tokens -= 1.0
        return text

    def retain(self, podgroups: Container[str], queues: Container[str]) -> None:
        """Forget PodGroups and Queues that are gone."""
        self._queues = {k: v for k, v in self._queues.items() if k in queues}
        self._podgroups = {k: v for k, v in self._podgroups.items() if k in podgroups}
        self._sent = {k: v for k, v in self._sent.items() if k in podgroups}
        self._events = {k: v for k, v in self._events.items() if k[0] in podgroups}
