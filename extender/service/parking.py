"""Parked gangs, the service's half: the rule that un-parks them, and the sessions it lets the engine skip.

The engine names the gangs a session judged unschedulable and may leave out next (`Decisions.parkable`;
`extender/engine/parking.py` says which and lists the *channels* a parked gang's answer reads). This keeps them
parked, with the PodGroup result they got, until an event on one of those channels (`observe`, fed every change the
cluster state folds into its snapshot, as records before and after; `before`, the plan's placements and the conf
each session runs with) — the un-park rule:

* a Node, Queue, PriorityClass, ConfigMap, or a kind this rule does not know, changed → every gang (nodes, queues);
* a pod that held room (on a node, not ended) left it, ended, began terminating or changed its request, or a planned
  placement was dropped or moved → every gang (room);
* a gang's own PodGroup changed (but for the scheduler's Unschedulable/Scheduled conditions) or one of its pods →
  that gang (own);
* with `requests`: a pending pod or a PodGroup added, changed or removed → every gang (a queue's new request moves
  what every queue deserves, and a queue's changed share reorders them: a gang judged before a parked one, in any
  queue, may now place less and leave it room);
* with `placed`: a pod placed (bound, or newly planned) or a placed pod changed → every gang;
* the conf changed → every gang, and the channels are read from the new one (conf);
* the session's other inputs changed (the pods idle-GPU reclaim may take, gang eviction's nominations, the vGPU
  cards of planned pods) → every gang.

And when nothing at all changed since the last session — no record, no placement, the same conf and inputs — the
engine would
compute exactly what it did last time (it is deterministic, and parking is off where it reads the clock): `quiet`
says so, and the service reuses the last result instead of running it again (`extender/service/session.py`).
"""

from __future__ import annotations

import dataclasses
import pickle
import threading
from collections.abc import Mapping

from extender.engine.conf import SchedulerConf
from extender.engine.parking import PLACED, REQUESTS, channels
from extender.engine.results import Decisions, PodGroupResult
from extender.engine.snapshot import PodGroupRecord, PodRecord, Snapshot

SCHEDULER_CONDITIONS = frozenset({"Unschedulable", "Scheduled"})


def holds_room(pod: PodRecord | None) -> bool:
    """A pod bound to a node and not ended: its requests count on that node."""
    return pod is not None and bool(pod.node_name) and pod.phase not in ("Succeeded", "Failed")


def _gang(pod: PodRecord | None) -> str:
    return f"{pod.namespace}/{pod.group}" if pod is not None and pod.group else ""


def _without_scheduler_conditions(pg: PodGroupRecord) -> PodGroupRecord:
    kept = tuple(c for c in pg.conditions if c.type not in SCHEDULER_CONDITIONS)
    return dataclasses.replace(pg, conditions=kept)


class Parking:
    """Which gangs the next session leaves out, and whether it may be skipped whole. One per session runner (it
    must see the very snapshot the sessions run over). Events arrive on the event loop while a session runs in a
    worker thread: every method holds one lock."""

    def __init__(self) -> None:
        self.parked: dict[str, PodGroupResult] = {}  # gang -> the result it was parked with
        self.channels: frozenset[str] | None = None  # None: parking off under the current conf
        self.changed = True  # anything changed since the last session took its snapshot
        self.last: Decisions | None = None  # the last session's result, whole (parked gangs' results merged in)
        # PodGroup -> (its result, the stored object's resourceVersion, planned, phase) when the status it would
        # write is already stored: the same result over the same object writes nothing (extender/service/session.py).
        self.settled: dict[str, tuple[PodGroupResult, str, bool, str]] = {}
        self._conf_key = b""
        self._placements: dict[str, str] = {}  # the placements the last session assumed (what `quiet` compares)
        # ...and the ones it left behind: those plus its own binds, which the plan takes. A parked gang was judged
        # with every one of them holding room, so a bind of that session dropped before it happened frees room too.
        self._assumed: dict[str, str] = {}
        self._inputs: object = None
        self._lock = threading.Lock()
        # What the rule un-parked since the running session took its snapshot (the gangs it judges now were not
        # parked yet; `adopt` parks none the rule has spoken of since): every gang, or these gangs.
        self._all_since = False
        self._gangs_since: set[str] = set()
        self.unparked = 0  # gangs taken out of parking so far (a test's and a bench's count)

    # ---- the rule ------------------------------------------------------------------------------------------------
    def unpark(self, gang: str) -> None:
        self._gangs_since.add(gang)
        if self.parked.pop(gang, None) is not None:
            self.unparked += 1

    def unpark_all(self) -> None:
        self._all_since = True
        self.unparked += len(self.parked)
        self.parked.clear()

    def observe(self, kind: str, old: object | None, new: object | None, snap: Snapshot) -> None:
        """One object changed in `snap` (its record before and after; None when absent). The rule reads only the
        records: `snap` is in the signature the cluster state calls its listeners with."""
        if old == new:
            return
        with self._lock:
            self.changed = True
            self._observe(kind, old, new)

    def _observe(self, kind: str, old: object | None, new: object | None) -> None:
        if kind == "Pod":
            self._pod(old if isinstance(old, PodRecord) else None, new if isinstance(new, PodRecord) else None)
        elif kind == "PodGroup":
            self._podgroup(old if isinstance(old, PodGroupRecord) else None,
                           new if isinstance(new, PodGroupRecord) else None)
        else:
            self.unpark_all()

    def _pod(self, old: PodRecord | None, new: PodRecord | None) -> None:
        for gang in {_gang(old), _gang(new)} - {""}:
            self.unpark(gang)
        held_before, held_after = holds_room(old), holds_room(new)
        if held_before:
            assert old is not None
            if not held_after or new is None or (new.node_name, new.request, new.deleting) != (
                    old.node_name, old.request, old.deleting):
                self.unpark_all()  # room may have grown
                return
        if held_after:
            if PLACED in (self.channels or ()):
                self.unpark_all()  # a new possible victim, or a placed pod changed
            return
        if (_gang(new) or _gang(old)) and REQUESTS in (self.channels or ()):
            self.unpark_all()

    def _podgroup(self, old: PodGroupRecord | None, new: PodGroupRecord | None) -> None:
        if old is not None and new is not None and (
                _without_scheduler_conditions(old) == _without_scheduler_conditions(new)):
            return  # the scheduler's own condition landed
        self.unpark((old or new).key if (old or new) is not None else "")  # type: ignore[union-attr]
        if REQUESTS in (self.channels or ()):
            self.unpark_all()

    # ---- around a session ------------------------------------------------------------------------------------
    def quiet(self, conf: SchedulerConf, placements: Mapping[str, str], inputs: object = None) -> bool:
        """Nothing changed since the last session — no record, the same placements, conf and other `inputs` — and
        parking is on (the engine does not read the clock): a session now would compute what the last one did."""
        with self._lock:
            return (not self.changed and self.last is not None and self.channels is not None
                    and placements == self._placements and inputs == self._inputs
                    and pickle.dumps(conf) == self._conf_key)

    def before(self, conf: SchedulerConf, placements: Mapping[str, str], snap: Snapshot,
               inputs: object = None) -> frozenset[str]:
        """A session is about to copy the cluster: take in its conf, the plan's placements (`snap`: the cluster
        state's snapshot, placements not overlaid) and its other `inputs` (compared whole); returns the gangs it
        leaves out."""
        with self._lock:
            key = pickle.dumps(conf)
            if key != self._conf_key:
                self._conf_key = key
                self.channels = channels(conf)
                self.unpark_all()
            if inputs != self._inputs:
                self._inputs = inputs
                self.unpark_all()
            if placements != self._assumed or placements != self._placements:
                self._placements_changed(placements, snap)
            self._placements = dict(placements)
            self._assumed = dict(placements)
            if self.channels is None:
                self.unpark_all()
            self.changed = False  # what arrives from now on is news to the next session
            self._all_since = False
            self._gangs_since.clear()
            return frozenset(self.parked)

    def _placements_changed(self, placements: Mapping[str, str], snap: Snapshot) -> None:
        for pod, node in self._assumed.items():
            if placements.get(pod) == node:
                continue
            record = snap.pods.get(pod)
            if record is None or record.node_name != node:
                self.unpark_all()  # dropped or moved before it was bound: its room is free again
                return
        if PLACED in (self.channels or ()) and any(self._placements.get(p) != n for p, n in placements.items()):
            self.unpark_all()

    def adopt(self, result: Decisions, left_out: Mapping[str, PodGroupResult]) -> Decisions:
        """A session's result, the gangs it left out (with their parked results) merged back in and the newly
        parkable ones parked, unless something about them arrived while it ran. Returns it whole (also `last`)."""
        with self._lock:
            for gang, parked in left_out.items():
                result.podgroups.setdefault(gang, parked)
            if result.pipelined:
                # A pipelined gang holds room that terminating pods release, yet is judged again every session (it
                # is not planned): if it fits less next time, it leaves room that a gang parked behind it may take.
                # Nothing is parked while any gang is pipelined; termination is brief.
                self.unpark_all()
            elif self.channels is not None and not self._all_since:
                for gang in result.parkable:
                    if gang not in self._gangs_since:
                        self.parked[gang] = result.podgroups[gang]
            self._assumed.update(result.binds)
            self.last = result
            return result

    def results(self, gangs: frozenset[str]) -> dict[str, PodGroupResult]:
        with self._lock:
            return {g: self.parked[g] for g in gangs if g in self.parked}
