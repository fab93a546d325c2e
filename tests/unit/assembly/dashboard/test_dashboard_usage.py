"""The dashboard shows each queue's decayed usage (fairshare's record, decayed to the page's time)."""

from __future__ import annotations

from datetime import UTC, datetime

from assembly.dashboard.forecast import replay
from assembly.dashboard.page import build
from assembly.dashboard.render import fragment
from assembly.why.gather import build_view
from extender.engine.run import parse_scheduler_conf
from tests.unit.extender.engine.builders import documents
from tests.unit.extender.engine.explain.test_explain import SHIPPED, gpu_nodes

RECORD = '{"at":"2026-01-01T00:00:00Z","halfLife":"168h","usage":{"nvidia.com/gpu":13680000}}'


def test_each_queue_shows_its_decayed_usage() -> None:
    docs = documents({"nodes": gpu_nodes(1), "queues": [
        {"name": "lab-a", "annotations": {"lapilli.io/decayed-usage": RECORD}}, {"name": "lab-b"}]})
    by_kind: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    page = build(build_view(by_kind), parse_scheduler_conf(SHIPPED.read_text()), "shipped", {},
                 now=datetime(2026, 1, 8, tzinfo=UTC))  # one half-life after the sample: 3,800 → 1,900
    assert [(q.name, q.usage) for q in page.queues] == [("lab-a", "1,900 GPU·h"), ("lab-b", "-")]
    html = fragment(page)
    assert "used 1,900 GPU·h" in html and html.count("used ") == 1


def test_a_waiting_jobs_row_shows_its_expected_start() -> None:
    from tests.unit.assembly.why.test_estimate import NOW, waiting_behind_llama

    llama, nxt, objects = waiting_behind_llama()
    conf = parse_scheduler_conf(None)
    forecast = replay(objects, [llama, nxt], conf, NOW)
    page = build(build_view({k: list(v.values()) for k, v in objects.items()}), conf,
                 "default", {}, now=datetime.fromtimestamp(NOW, UTC), jobs=[llama, nxt], forecast=forecast)
    rows = {j.key: j for q in page.queues for j in q.jobs}
    assert rows["ml/next"].estimate.startswith("expected to start in about 40 min (when ml/llama-70b ends")
    assert rows["ml/llama-70b"].estimate == ""
    assert "expected to start in about 40 min" in fragment(page)
