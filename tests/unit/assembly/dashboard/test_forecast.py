"""The dashboard's expected starts come from one replay per change of the cluster, made off the page's refresh
(assembly/dashboard/forecast.py): a refresh never waits for a replay, and an unchanged cluster is not replayed."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from assembly.dashboard.forecast import Forecaster
from assembly.dashboard.page import Page
from assembly.dashboard.render import fragment
from assembly.dashboard.server import Dashboard
from assembly.why.estimate import Estimate, estimates
from extender.engine.conf import SchedulerConf
from extender.engine.run import parse_scheduler_conf
from lapilli.kube.client import ObjectList, WatchEvent
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import Resource
from lapilli.meta import Obj

CONF = parse_scheduler_conf(None)


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


class Replays:
    """A stand-in replay: job `ml/next` starts 2,400 s after the replay's clock; counts its calls."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, objects: Mapping[str, Mapping[str, Obj]], jobs: Sequence[Obj], conf: SchedulerConf,
                 now: float) -> dict[str, Estimate]:
        self.calls.append(now)
        return {"ml/next": Estimate(2400.0, "ml/llama-70b", "by its volcano.sh/expected-duration"),
                "ml/later": Estimate(None, unknown=["ml/llama-70b"])}


def test_an_unchanged_cluster_is_replayed_once_and_its_starts_count_down() -> None:
    runs, clock = Replays(), Clock()
    forecaster = Forecaster(runs, background=False, clock=clock)
    first = forecaster.current(("rv", "1"), {}, [], CONF)
    assert first is not None and runs.calls == [clock.now]
    clock.now += 600
    again = forecaster.current(("rv", "1"), {}, [], CONF)
    assert again is first and len(runs.calls) == 1
    shown = again.seen_at(clock.now)
    assert shown["ml/next"].seconds == 1800 and shown["ml/next"].text().startswith("expected to start in about 30 min")
    assert shown["ml/later"].seconds is None
    clock.now += 3000
    assert again.seen_at(clock.now)["ml/next"].text() == "expected to start now"
    changed = forecaster.current(("rv", "2"), {}, [], CONF)
    assert changed is not None and changed.key == ("rv", "2") and len(runs.calls) == 2


def test_a_refresh_does_not_wait_for_a_replay_and_starts_no_second_one_meanwhile() -> None:
    release, started = threading.Event(), threading.Event()
    runs = Replays()

    def slow(objects: Mapping[str, Mapping[str, Obj]], jobs: Sequence[Obj], conf: SchedulerConf,
             now: float) -> dict[str, Estimate]:
        started.set()
        assert release.wait(10)
        return runs(objects, jobs, conf, now)

    forecaster = Forecaster(slow)
    assert forecaster.current(("rv", "1"), {}, [], CONF) is None  # nothing yet: the page shows no estimate
    assert started.wait(10)
    assert forecaster.current(("rv", "2"), {}, [], CONF) is None  # the first replay still runs: no second one
    release.set()
    for _ in range(1000):
        if forecaster.latest is not None:
            break
        threading.Event().wait(0.01)
    assert forecaster.latest is not None and forecaster.latest.key == ("rv", "1") and len(runs.calls) == 1


def test_a_failing_replay_keeps_the_last_answers_and_rests_before_trying_again() -> None:
    clock, runs = Clock(), Replays()
    failing = [False]

    def flaky(objects: Mapping[str, Mapping[str, Obj]], jobs: Sequence[Obj], conf: SchedulerConf,
              now: float) -> dict[str, Estimate]:
        if failing[0]:
            raise RuntimeError("a bug in the replay")
        return runs(objects, jobs, conf, now)

    forecaster = Forecaster(flaky, background=False, clock=clock)
    good = forecaster.current(("rv", "1"), {}, [], CONF)
    failing[0] = True
    clock.now += 10
    assert forecaster.current(("rv", "2"), {}, [], CONF) is good
    failing[0] = False
    clock.now += 10
    assert forecaster.current(("rv", "2"), {}, [], CONF) is not good  # tried again once rested


class _Cluster:
    """An API server that lists `objects` (resourceVersion "1") and whose watches see nothing change."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    async def list(self, res: Resource, namespace: str | None = None, **_: Any) -> ObjectList:
        return ObjectList([o for o in self.objects if o["kind"] == res.kind and o.get("apiVersion") == res.api_version],
                          "1")

    async def watch(self, res: Resource, namespace: str | None = None, **kw: Any) -> AsyncIterator[WatchEvent]:
        kw["on_open"]()
        await asyncio.Event().wait()
        yield  # type: ignore[misc]

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        raise NotFound(404, "NotFound", f"{res.plural} {name}")


async def test_the_page_replays_once_while_its_watches_see_no_change() -> None:
    from tests.unit.assembly.why.test_estimate import NOW, waiting_behind_llama

    llama, nxt, objects = waiting_behind_llama()
    cluster = _Cluster([o for kind in objects.values() for o in kind.values()] + [llama, nxt])
    dashboard = Dashboard(cluster, None)  # type: ignore[arg-type]
    calls: list[float] = []

    def counted(objects: Mapping[str, Mapping[str, Obj]], jobs: Sequence[Obj], conf: SchedulerConf,
                now: float) -> dict[str, Estimate]:
        calls.append(now)
        return estimates(objects, jobs, conf, NOW)  # the replay as if the page were rendered at NOW

    dashboard.forecaster = Forecaster(counted, background=False)
    await dashboard.start(sync_timeout_s=30)
    try:
        first, second = dashboard.render(False), dashboard.render(False)
    finally:
        await dashboard.stop()
    assert len(calls) == 1
    assert "expected to start in about" in first and "(when ml/llama-70b ends" in first
    assert "expected to start in about" in second and "expected starts as of" not in second


def test_the_page_says_when_its_expected_starts_were_made_once_the_cluster_changed() -> None:
    page = Page(queues=[], nodes=[], conf="default", at="2026-11-26 10:00:02 UTC")
    assert "expected starts as of" not in fragment(page)
    page.estimated_at = "09:58:40 UTC"
    assert "· expected starts as of 09:58:40 UTC" in fragment(page)
