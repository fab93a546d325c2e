"""The dashboard's time axis: each queue's GPUs allocated vs deserved over the last day, how long each job waited
(or has been waiting), and the jobs whose GPUs the leader finds idle.

Where the day comes from: the service's own history (ConfigMap `lapilli-system/lapilli-history`, `lapilli.history`),
or, with `lapilli dashboard --prometheus URL`, the service's metrics as Prometheus kept them
(`lapilli_queue_allocated` / `lapilli_queue_deserved`); job waits always come from the service's history and the
PodGroups that still wait. The sources are followed in the background (`HistoryFeed`); the page reads what they last
got, so rendering never waits on the network.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from assembly.why.gather import ClusterView
from lapilli.history import DAY_S, HISTORY_CONFIGMAP, HISTORY_KEY, HISTORY_NAMESPACE, History, QueueSeries
from lapilli.idlegpu import IDLE_CONDITION
from lapilli.kube import REQUEST_ERRORS, ApiError, KubeClient, NotFound
from lapilli.kube.resources import CONFIG_MAPS
from lapilli.prometheus import Prometheus, PrometheusError
from lapilli.times import parse_rfc3339

log = logging.getLogger("lapilli.dashboard")

REFRESH_S: Final = 30.0
STEP_S: Final = 300.0
WAITS_SHOWN: Final = 15
WAITING_PHASES: Final = frozenset({"", "Pending", "Inqueue", "Unknown"})


@dataclass(frozen=True, slots=True)
class QueueChart:
    name: str
    times: list[float]
    allocated: list[float | None]
    deserved: list[float | None]


@dataclass(frozen=True, slots=True)
class WaitBar:
    key: str
    queue: str
    waited_s: float
    waiting: bool  # still waiting (else: started after that wait)


@dataclass(frozen=True, slots=True)
class IdleRow:
    key: str
    queue: str
    reason: str
    message: str
    since: str


@dataclass(slots=True)
class Timeline:
    source: str  # where the charts come from
    note: str = ""  # why there is no chart (yet), when there is none
    charts: list[QueueChart] = field(default_factory=list)
    waits: list[WaitBar] = field(default_factory=list)
    idle: list[IdleRow] = field(default_factory=list)
    start: float = 0.0
    end: float = 0.0


class HistoryFeed:
    """Follows the service's history ConfigMap (and Prometheus, when given) every `REFRESH_S`."""

    def __init__(self, client: KubeClient, prometheus_url: str | None = None, clock: Any = None) -> None:
        self.client = client
        self.prometheus = Prometheus(prometheus_url) if prometheus_url else None
        self.history: History | None = None  # the service's, last read
        self.gap = "not read yet"  # why `history` is None
        self.queues: dict[str, QueueSeries] | None = None  # from Prometheus, when asked
        self.times: list[float] = []
        self.prometheus_gap = ""
        self._clock = clock or (lambda: datetime.now().timestamp())
        self._task: asyncio.Task[None] | None = None

    @property
    def source(self) -> str:
        if self.prometheus is not None:
            return f"Prometheus at {self.prometheus.url} (lapilli_queue_allocated, lapilli_queue_deserved)"
        return f"the service's history (ConfigMap {HISTORY_NAMESPACE}/{HISTORY_CONFIGMAP})"

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._follow(), name="dashboard-history")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.prometheus is not None:
            await self.prometheus.close()

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            await self.refresh()

    async def refresh(self) -> None:
        await self._read_configmap()
        if self.prometheus is not None:
            await self._read_prometheus()

    async def _read_configmap(self) -> None:
        try:
            cm = await self.client.get(CONFIG_MAPS, HISTORY_CONFIGMAP, HISTORY_NAMESPACE)
            self.history, self.gap = History.from_json(str((cm.get("data") or {}).get(HISTORY_KEY) or "")), ""
        except NotFound:
            self.history, self.gap = None, ("no history yet: the service's leader writes it every --history-interval "
                                            "(5 minutes)")
        except ApiError as exc:
            self.history = None
            self.gap = f"the history ConfigMap is not readable with your credentials ({exc.status} {exc.reason})"
        except ValueError as exc:
            self.history, self.gap = None, f"the history ConfigMap is unreadable: {exc}"
        except REQUEST_ERRORS as exc:
            self.gap = f"the history ConfigMap could not be read: {exc}"  # keep what was read last

    async def _read_prometheus(self) -> None:
        assert self.prometheus is not None
        end = self._clock()
        start = end - DAY_S
        try:
            allocated = await self.prometheus.query_range(
                'max by (queue) (lapilli_queue_allocated{resource="nvidia.com/gpu"})', start, end, STEP_S)
            deserved = await self.prometheus.query_range(
                'max by (queue) (lapilli_queue_deserved{resource="nvidia.com/gpu"})', start, end, STEP_S)
        except PrometheusError as exc:
            self.prometheus_gap = str(exc)
            return
        times = sorted({t for s in [*allocated, *deserved] for t, _ in s.points})
        queues: dict[str, QueueSeries] = {}
        for kind, series in (("allocated", allocated), ("deserved", deserved)):
            for s in series:
                by_time = dict(s.points)
                chart = queues.setdefault(s.labels.get("queue", ""), QueueSeries([None] * len(times),
                                                                                 [None] * len(times)))
                setattr(chart, kind, [by_time.get(t) for t in times])
        self.times, self.queues, self.prometheus_gap = times, queues, ""


def timeline(feed: HistoryFeed, view: ClusterView, now: datetime,
             live: Mapping[str, tuple[float, float | None]] | None = None) -> Timeline:
    """The page's time section from what `feed` last read and the cluster as it is now; `live`: each queue's GPUs
    (allocated, deserved) as the page's own session counts them, the charts' last point."""
    out = Timeline(feed.source, start=now.timestamp() - DAY_S, end=now.timestamp())
    if feed.prometheus is not None:
        times, queues, out.note = feed.times, feed.queues or {}, feed.prometheus_gap
    else:
        history = feed.history
        times, queues, out.note = (history.times, history.queues, "") if history else ([], {}, feed.gap)
    live = live or {}
    for name in sorted({*queues, *live}):
        series = queues.get(name) or QueueSeries([None] * len(times), [None] * len(times))
        chart = QueueChart(name, times, series.allocated, series.deserved)
        if name in live:
            allocated, deserved = live[name]
            chart = QueueChart(name, [*times, now.timestamp()], [*series.allocated, allocated],
                               [*series.deserved, deserved])
        if any(chart.allocated) or any(chart.deserved):
            out.charts.append(chart)
    if not out.charts and not out.note:
        out.note = "no queue held GPUs over the last day"
    out.waits = _waits(feed.history, view.objects.get("PodGroup", {}), now.timestamp())
    out.idle = idle_rows(view.objects.get("PodGroup", {}))
    return out


def _waits(history: History | None, podgroups: Mapping[str, Mapping[str, Any]], now: float) -> list[WaitBar]:
    """The longest waits: jobs that started within the day (the service's history), and those that still wait."""
    bars = [WaitBar(s.key, s.queue, s.waited_s, False) for s in (history.started if history else [])
            if s.started >= now - DAY_S]
    for key, pg in podgroups.items():
        phase = str((pg.get("status") or {}).get("phase") or "")
        created = (pg.get("metadata") or {}).get("creationTimestamp")
        if phase in WAITING_PHASES and created:
            queue = str((pg.get("spec") or {}).get("queue") or "default")
            bars.append(WaitBar(key, queue, max(now - parse_rfc3339(str(created)), 0.0), True))
    return sorted(bars, key=lambda b: (-b.waited_s, b.key))[:WAITS_SHOWN]


def idle_rows(podgroups: Mapping[str, Mapping[str, Any]]) -> list[IdleRow]:
    """PodGroups whose lapilli.io/IdleGPU condition says their GPUs are idle (warned or reclaimable)."""
    rows = []
    for key, pg in sorted(podgroups.items()):
        for c in (pg.get("status") or {}).get("conditions") or []:
            if c.get("type") == IDLE_CONDITION and c.get("status") == "True":
                rows.append(IdleRow(key, str((pg.get("spec") or {}).get("queue") or "default"), str(c.get("reason")),
                                    str(c.get("message") or ""), str(c.get("lastTransitionTime") or "")))
    return rows


__all__ = ["HistoryFeed", "IdleRow", "QueueChart", "Timeline", "WaitBar", "idle_rows", "timeline"]
