"""The dashboard's last day and idle GPUs (assembly/dashboard/timeline.py, charts.py) and the page's security
headers: charts from the service's history or from Prometheus, waits of started and waiting jobs, idle candidates."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from assembly.dashboard.charts import queue_chart, wait_chart
from assembly.dashboard.page import build
from assembly.dashboard.render import CONTENT_SECURITY_POLICY, document
from assembly.dashboard.server import make_app
from assembly.dashboard.timeline import HistoryFeed, QueueChart, WaitBar, timeline
from extender.engine.run import parse_scheduler_conf
from lapilli.history import History, Started
from lapilli.kube.errors import ApiError, NotFound
from lapilli.kube.resources import Resource
from tests.unit.assembly.dashboard.test_dashboard import _view
from tests.unit.extender.engine.explain.test_explain import SHIPPED

SESSION_LOOP = pytest.mark.asyncio(loop_scope="session")  # the loop the async fixtures run on

NOW = datetime(2026, 1, 2, tzinfo=UTC)
T = NOW.timestamp()


class _Cluster:
    """Answers the history ConfigMap's GET (or refuses it)."""

    def __init__(self, history: History | None = None, refuse: int = 0) -> None:
        self.history, self.refuse = history, refuse

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        if self.refuse:
            raise ApiError(self.refuse, "Forbidden", "no")
        if self.history is None:
            raise NotFound(404, "NotFound", "none")
        return {"data": {"history.json": self.history.to_json()}}


def _history() -> History:
    history = History()
    history.sample(T - 7200, {"lab-a-alice": (2.0, 4.0)})
    history.sample(T - 3600, {"lab-a-alice": (4.0, 4.0), "lab-a": (0.0, None)})
    history.add_started(Started("u/old", "lab-a-alice", T - 5000, T - 1400))
    history.add_started(Started("u/long-ago", "lab-a-alice", T - 200000, T - 190000))
    return history


def _feed(cluster: _Cluster) -> HistoryFeed:
    return HistoryFeed(cluster, clock=lambda: T)  # type: ignore[arg-type]


@SESSION_LOOP
async def test_charts_waits_and_idle_candidates_from_the_services_history() -> None:
    feed = _feed(_Cluster(_history()))
    await feed.refresh()
    view = _view()
    view.objects["PodGroup"]["u/run"].setdefault("status", {})["conditions"] = [{
        "type": "lapilli.io/IdleGPU", "status": "True", "reason": "Reclaimable", "message": "GPUs below 5% for 2h",
        "lastTransitionTime": "2026-01-01T22:00:00Z"}]
    view.objects["PodGroup"]["u/<big>"]["metadata"]["creationTimestamp"] = "2026-01-01T23:00:00Z"
    time = timeline(feed, view, NOW)
    assert [c.name for c in time.charts] == ["lab-a-alice"], "a queue that never held GPUs has no chart"
    assert time.charts[0].allocated == [2.0, 4.0] and time.note == ""
    # u/<big> waits (since 23:00: 1h), u/old waited 1h at its start; a start older than a day is not shown.
    assert [(w.key, w.waited_s, w.waiting) for w in time.waits] == [("u/<big>", 3600.0, True),
                                                                  ("u/old", 3600.0, False)]
    assert [(r.key, r.reason) for r in time.idle] == [("u/run", "Reclaimable")]

    page = build(view, parse_scheduler_conf(SHIPPED.read_text()), "shipped", {}, NOW)
    page.timeline = time
    html = document(page)
    assert html.count('<svg class="chart"') == 1 and 'data-queue="lab-a-alice"' in html
    assert "u/&lt;big&gt;" in html and "u/<big>" not in html
    assert re.search(r'<table id="idle">.*u/run.*Reclaimable.*GPUs below 5% for 2h', html)
    # The page's own session gives each chart its last point: now.
    live = timeline(feed, view, NOW, {"lab-a-alice": (3.0, 4.0), "lab-b": (1.0, None)})
    assert [(c.name, c.times[-1], c.allocated[-1]) for c in live.charts] == [("lab-a-alice", T, 3.0), ("lab-b", T, 1.0)]


@SESSION_LOOP
@pytest.mark.parametrize(("cluster", "note"), [
    (_Cluster(None), "no history yet: the service's leader writes it every --history-interval"),
    (_Cluster(refuse=403), "the history ConfigMap is not readable with your credentials (403 Forbidden)"),
])
async def test_no_history_says_why(cluster: _Cluster, note: str) -> None:
    feed = _feed(cluster)
    await feed.refresh()
    time = timeline(feed, _view(), NOW)
    assert time.charts == [] and note in time.note


def test_svg_breaks_lines_where_a_queue_was_not_sampled_and_escapes() -> None:
    chart = QueueChart("<q>", [T - 3, T - 2, T - 1, T], [1.0, None, 2.0, 3.0], [None, None, None, 4.0])
    svg = queue_chart(chart, T - 86400, T)
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 2  # [1] alone, [2, 3], deserved [4] alone
    assert 'data-queue="&lt;q&gt;"' in svg and "<q>" not in svg
    bars = wait_chart([WaitBar("ns/a", "q", 7200, False), WaitBar("ns/b", "q", 3600, True)])
    assert bars.count("<rect") == 2 and ">120m<" in bars and ">60m so far<" in bars


@SESSION_LOOP
async def test_charts_from_prometheus() -> None:
    asked: list[str] = []

    async def query_range(request: web.Request) -> web.Response:
        asked.append(request.query["query"])
        metric = "allocated" if "allocated" in request.query["query"] else "deserved"
        values = [[T - 600, "2"], [T - 300, "3"]] if metric == "allocated" else [[T - 300, "4"]]
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": [
            {"metric": {"queue": "lab-a"}, "values": values}]}})

    app = web.Application()
    app.router.add_get("/api/v1/query_range", query_range)
    async with TestServer(app) as server:
        feed = HistoryFeed(_Cluster(None), str(server.make_url("")), clock=lambda: T)  # type: ignore[arg-type]
        await feed.refresh()
        await feed.stop()
    time = timeline(feed, _view(), NOW)
    assert time.source.startswith("Prometheus at http://") and time.note == ""
    assert [(c.name, c.allocated, c.deserved) for c in time.charts] == [("lab-a", [2.0, 3.0], [None, 4.0])]
    assert asked == ['max by (queue) (lapilli_queue_allocated{resource="nvidia.com/gpu"})',
                     'max by (queue) (lapilli_queue_deserved{resource="nvidia.com/gpu"})']


class _Page:
    def render(self, whole: bool) -> str:
        page = build(_view(), parse_scheduler_conf(SHIPPED.read_text()), "shipped", {}, NOW)
        return document(page)


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    async with TestClient(TestServer(make_app(_Page(), lambda: 8765))) as c:  # type: ignore[arg-type]
        yield c


@SESSION_LOOP
async def test_every_answer_carries_the_security_headers_and_the_policy_admits_the_pages_own_script(
        client: TestClient) -> None:
    for host in ("127.0.0.1:8765", "evil.example:8765"):
        resp = await client.get("/", headers={"Host": host})
        assert resp.headers["X-Content-Type-Options"] == "nosniff" and resp.headers["X-Frame-Options"] == "DENY"
        assert resp.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    html = await (await client.get("/", headers={"Host": "127.0.0.1:8765"})).text()
    [script] = re.findall(r"<script>(.*?)</script>", html, re.S)
    [style] = re.findall(r"<style>(.*?)</style>", html, re.S)
    for text, directive in ((script, "script-src"), (style, "style-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert f"{directive} 'sha256-{digest}'" in CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY
    # Nothing inline but the hashed blocks: no style attribute (bars are SVG), so none needs 'unsafe-inline'.
    assert "unsafe" not in CONTENT_SECURITY_POLICY and "style-src-attr 'none'" in CONTENT_SECURITY_POLICY
    assert re.search(r"\sstyle\s*=", html) is None and "<svg class=\"bar\"" in html
