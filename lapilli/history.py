"""The scheduler's own short history, as the dashboard draws it: each queue's GPUs allocated and deserved, sampled
by the leader over the last day, and when each job that started in that day was created and started. The leader
keeps it in the ConfigMap `lapilli-system/lapilli-history` (key `history.json`), so it outlives a leader change and
a user's dashboard reads it with their own kubeconfig.

`{"version": 1, "resource": "nvidia.com/gpu", "times": [t, …], "queues": {"q": {"allocated": [a, …],
"deserved": [d | null, …]}}, "started": [{"key": "ns/pg", "queue": "q", "created": t, "started": t}, …]}`: times in
unix seconds, each queue's lists aligned with `times` (null where the queue was not there or had no deserved share),
amounts in GPUs. Bounded: a day of samples, at most `MAX_QUEUES` queues and `MAX_STARTED` jobs (the newest kept).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lapilli.resources.units import GPU

HISTORY_NAMESPACE: Final = "lapilli-system"
HISTORY_CONFIGMAP: Final = "lapilli-history"
HISTORY_KEY: Final = "history.json"
DAY_S: Final = 86400.0
MAX_QUEUES: Final = 200
MAX_STARTED: Final = 1000


@dataclass(slots=True)
class QueueSeries:
    allocated: list[float | None] = field(default_factory=list)
    deserved: list[float | None] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Started:
    key: str
    queue: str
    created: float
    started: float

    @property
    def waited_s(self) -> float:
        return max(self.started - self.created, 0.0)


@dataclass(slots=True)
class History:
    resource: str = GPU
    times: list[float] = field(default_factory=list)
    queues: dict[str, QueueSeries] = field(default_factory=dict)
    started: list[Started] = field(default_factory=list)
    # (key, created) of `started`: a job reported again replaces its entry, and telling whether it is there must
    # not walk the list (thousands of starts between trims).
    _reported: set[tuple[str, float]] = field(default_factory=set, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._reindex()

    def _reindex(self) -> None:
        self._reported = {(s.key, s.created) for s in self.started}

    def sample(self, at: float, amounts: Mapping[str, tuple[float, float | None]]) -> None:
        """One sample: queue -> (allocated, deserved) at `at`."""
        for name in amounts:
            if name not in self.queues and len(self.queues) < MAX_QUEUES:
                self.queues[name] = QueueSeries([None] * len(self.times), [None] * len(self.times))
        self.times.append(at)
        for name, series in self.queues.items():
            allocated, deserved = amounts.get(name, (None, None))
            series.allocated.append(None if allocated is None else round(allocated, 3))
            series.deserved.append(None if deserved is None else round(deserved, 3))

    def add_started(self, job: Started) -> None:
        reported = (job.key, job.created)
        if reported in self._reported:
            self.started = [s for s in self.started if (s.key, s.created) != reported]
        self._reported.add(reported)
        self.started.append(job)

    def trim(self, now: float, window_s: float = DAY_S) -> None:
        """Keep the last `window_s` of samples and of starts; drop queues with nothing left."""
        first = next((i for i, t in enumerate(self.times) if t >= now - window_s), len(self.times))
        self.times = self.times[first:]
        for name in list(self.queues):
            series = self.queues[name]
            series.allocated, series.deserved = series.allocated[first:], series.deserved[first:]
            if all(v is None for v in series.allocated):
                del self.queues[name]
        kept = [s for s in self.started if s.started >= now - window_s]
        self.started = sorted(kept, key=lambda s: (s.started, s.key))[-MAX_STARTED:]
        self._reindex()

    def to_json(self) -> str:
        return json.dumps({
            "version": 1, "resource": self.resource, "times": [round(t, 1) for t in self.times],
            "queues": {n: {"allocated": s.allocated, "deserved": s.deserved} for n, s in sorted(self.queues.items())},
            "started": [{"key": s.key, "queue": s.queue, "created": s.created, "started": s.started}
                        for s in self.started],
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> History:
        """Read a record back; ValueError when it is not one."""
        try:
            doc = json.loads(text)
            times = [float(t) for t in doc["times"]]
            queues = {str(n): QueueSeries(_aligned(s["allocated"], times), _aligned(s["deserved"], times))
                      for n, s in dict(doc.get("queues") or {}).items()}
            started = [Started(str(s["key"]), str(s["queue"]), float(s["created"]), float(s["started"]))
                       for s in doc.get("started") or []]
            return cls(str(doc.get("resource") or GPU), times, queues, started)
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a Lapilli history record: {exc}") from exc


def _aligned(values: Any, times: list[float]) -> list[float | None]:
    out = [None if v is None else float(v) for v in values]
    if len(out) != len(times):
        raise ValueError(f"{len(out)} values for {len(times)} sample times")
    return out


__all__ = ["DAY_S", "HISTORY_CONFIGMAP", "HISTORY_KEY", "HISTORY_NAMESPACE", "History", "QueueSeries", "Started"]
