"""The dashboard's page model and HTML (assembly/dashboard), over a plain cluster view."""

from __future__ import annotations

from datetime import UTC, datetime

from assembly.dashboard.page import build
from assembly.dashboard.render import document, fragment
from assembly.why.gather import build_view
from extender.engine.run import parse_scheduler_conf
from tests.unit.extender.engine.builders import documents
from tests.unit.extender.engine.explain.test_explain import SHIPPED, gang, gpu_nodes, scenario


def _view():  # type: ignore[no-untyped-def]
    s = scenario(gang("u/run", 2, "lab-a-alice", running_on="n0"), gang("u/<big>", 4, "lab-a-alice", phase="Pending"),
                 nodes=gpu_nodes(1), queues=[{"name": "lab-a"}, {"name": "lab-a-alice", "parent": "lab-a",
                                                                  "capability": {"nvidia.com/gpu": "4"}}])
    by_kind: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for doc in documents(s):
        by_kind.setdefault(doc["kind"], []).append(doc)
    return build_view(by_kind)


def test_queues_as_a_tree_with_their_jobs_and_reasons() -> None:
    page = build(_view(), parse_scheduler_conf(SHIPPED.read_text()), "shipped", {},
                 now=datetime(2026, 1, 1, tzinfo=UTC))
    assert [(q.name, q.depth) for q in page.queues] == [("lab-a", 0), ("lab-a-alice", 1)]
    alice = page.queues[1]
    assert [(j.key, j.kind) for j in alice.jobs] == [("u/<big>", "OverCapability"), ("u/run", "Running")]
    assert "may use 2 more of its capability 4" in alice.jobs[0].why
    gpu = next(b for b in alice.bars if b.resource == "nvidia.com/gpu")
    assert (gpu.allocated, gpu.capability) == (2, 4)
    assert [(n.name, n.gpus_used, n.gpus) for n in page.nodes] == [("n0", 2, 4)]


def test_html_reads_without_script_and_escapes_names() -> None:
    page = build(_view(), parse_scheduler_conf(SHIPPED.read_text()), "shipped", {})
    html = document(page)
    assert "u/&lt;big&gt;" in html and "u/<big>" not in html
    assert html.index("<table") < html.index("<script>")  # the content comes first, the script only refreshes
    assert fragment(page) in html
