"""The dashboard's expected starts, computed off the page's refresh (the start-time replay of issue 21).

The replay (`assembly.why.estimate`: the scheduler's engine run forward from the cluster as it is) costs seconds on
a busy cluster of a few hundred nodes and minutes on a few thousand (bench/README.md), while the page refreshes
every two seconds. So the dashboard replays once per change of what it reads, in one background thread, one replay
at a time, and rests as long as the last replay took before starting another (at most half a core, however busy the
cluster). A refresh shows the latest finished replay: each start it found is a wall-clock time, counted down to the
page's clock, so an unchanged cluster reads the same answers a fresh replay would give. While the cluster has
changed since, the page says when the shown estimates were made.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from assembly.why.estimate import Estimate, estimates
from extender.engine.conf import SchedulerConf
from lapilli.meta import Obj

log = logging.getLogger("lapilli.dashboard")

Objects = Mapping[str, Mapping[str, Obj]]
Replay = Callable[[Objects, Sequence[Obj], SchedulerConf, float], Mapping[str, Estimate]]


@dataclass(frozen=True, slots=True)
class Forecast:
    """One replay's answers (`ns/job` -> Estimate, in seconds from `at`), for the inputs `key` names."""

    key: Hashable
    at: float  # the wall clock the replay started from
    estimates: Mapping[str, Estimate]

    def seen_at(self, now: float) -> dict[str, Estimate]:
        """The estimates as seconds from `now` (a start already due reads "now")."""
        return {job: e if e.seconds is None else replace(e, seconds=e.seconds - (now - self.at))
                for job, e in self.estimates.items()}


def replay(objects: Objects, jobs: Sequence[Obj], conf: SchedulerConf, now: float, key: Hashable = None) -> Forecast:
    """One replay, here and now."""
    return Forecast(key, now, estimates(objects, jobs, conf, now))


class Forecaster:
    """The latest replay, and the next one started when the inputs changed (`background=False`: in the caller)."""

    def __init__(self, run: Replay = estimates, *, background: bool = True,
                 clock: Callable[[], float] = time.time) -> None:
        self.run, self.background, self.clock = run, background, clock
        self.latest: Forecast | None = None
        self._lock = threading.Lock()
        self._busy = False
        self._rest_until = 0.0

    def current(self, key: Hashable, objects: Objects, jobs: Sequence[Obj], conf: SchedulerConf) -> Forecast | None:
        """The latest finished replay (None before the first one ends); starts a replay over these inputs unless
        one runs, the latest is of the same `key`, or the forecaster rests."""
        now = self.clock()
        with self._lock:
            latest = self.latest
            start = (latest is None or latest.key != key) and not self._busy and now >= self._rest_until
            self._busy = self._busy or start
        if start:
            args = (key, objects, jobs, conf, now)
            if self.background:
                threading.Thread(target=self._replay, args=args, name="lapilli-forecast", daemon=True).start()
            else:
                self._replay(*args)
        return self.latest

    def _replay(self, key: Hashable, objects: Objects, jobs: Sequence[Obj], conf: SchedulerConf, now: float) -> None:
        began = time.monotonic()
        try:
            found: Forecast | None = Forecast(key, now, self.run(objects, jobs, conf, now))
        except Exception:  # a replay that fails must not take the page with it: the last answers stay
            log.exception("the start-time replay failed; the expected starts shown are older")
            found = None
        with self._lock:
            self._busy = False
            if found is not None:
                self.latest = found
            self._rest_until = self.clock() + (time.monotonic() - began)


__all__ = ["Forecast", "Forecaster", "replay"]
