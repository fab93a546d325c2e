"""The dashboard's page model and HTML (assembly/dashboard), over a plain cluster view."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from assembly.dashboard.page import build
from assembly.dashboard.render import document, fragment
from assembly.dashboard.server import Dashboard, make_app
from assembly.why.gather import Unreadable, build_view
from extender.engine.run import parse_scheduler_conf
from lapilli.kube.client import ObjectList, WatchEvent
from lapilli.kube.errors import ApiError
from lapilli.kube.resources import Resource
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


def test_partial_view_names_what_could_not_be_read_and_shows_the_schedulers_condition() -> None:
    view = _view()
    view.unreadable.append(Unreadable("Node", "cluster", 403, "Forbidden"))
    pg = view.objects["PodGroup"]["u/<big>"]
    pg.setdefault("status", {})["conditions"] = [{"type": "lapilli.io/Why", "status": "True", "reason": "ClusterFull",
                                                  "message": "1. needs gpu 4", "lastTransitionTime": "T0"}]
    conf = parse_scheduler_conf(SHIPPED.read_text())
    page = build(view, conf, "shipped", {},
                 unreadable=[Unreadable("ConfigMap", "lapilli-system/lapilli-scheduler-conf", 403, "Forbidden")])
    assert page.unreadable == ["Node (cluster): 403 Forbidden",
                               "ConfigMap (lapilli-system/lapilli-scheduler-conf): 403 Forbidden"]
    big = next(j for j in page.queues[1].jobs if j.key == "u/<big>")
    assert big.scheduler.endswith("ClusterFull: 1. needs gpu 4")
    html = fragment(page)
    assert 'id="partial"' in html and "Node (cluster): 403 Forbidden" in html and "ClusterFull: 1. needs gpu 4" in html
    # Everything readable: no banner, no second opinion.
    whole = build(_view(), conf, "shipped", {})
    assert not whole.unreadable and 'id="partial"' not in fragment(whole)
    assert all(not j.scheduler for q in whole.queues for j in q.jobs)


def test_podgroups_of_a_missing_queue_are_listed_under_missing_queue() -> None:
    s = scenario(gang("u/orphan", 1, "gone"), gang("u/ok", 1, "lab-a"), nodes=gpu_nodes(1),
                 queues=[{"name": "lab-a"}])
    by_kind: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for doc in documents(s):
        by_kind.setdefault(doc["kind"], []).append(doc)
    page = build(build_view(by_kind), parse_scheduler_conf(SHIPPED.read_text()), "shipped", {})
    assert [(j.key, j.kind) for j in page.missing] == [("u/orphan", "QueueMissing")]
    assert [j.key for q in page.queues for j in q.jobs] == ["u/ok"]
    html = fragment(page)
    assert "missing queue" in html and html.index("missing queue") < html.index("u/orphan")


class _Dashboard(Dashboard):
    def __init__(self) -> None:  # no cluster: render only
        pass

    def render(self, whole: bool) -> str:
        return "page" if whole else "fragment"


@pytest.mark.parametrize("host, status", [
    ("127.0.0.1:8765", 200), ("localhost:8765", 200),
    ("evil.example:8765", 421), ("127.0.0.1:9999", 421), ("127.0.0.1", 421), ("0.0.0.0:8765", 421),
])
async def test_requests_naming_another_host_are_refused(host: str, status: int) -> None:
    """DNS rebinding: a page from evil.example whose name now resolves to 127.0.0.1 sends Host: evil.example."""
    async with TestClient(TestServer(make_app(_Dashboard(), lambda: 8765))) as client:
        for path in ("/", "/fragment"):
            resp = await client.get(path, headers={"Host": host})
            assert resp.status == status, (path, host)


class _NamespaceUser:
    """The API server for a user who may read Nodes, Queues and PriorityClasses, but Pods and PodGroups (and Events)
    only in their namespace `u`: lists and watches elsewhere are refused with 403."""

    def __init__(self) -> None:
        s = scenario(gang("u/big", 4, "lab-a", phase="Pending"), gang("other/run", 1, "lab-a", running_on="n0"),
                     nodes=gpu_nodes(1), queues=[{"name": "lab-a", "capability": {"nvidia.com/gpu": "2"}}])
        self.objects = documents(s)

    def _check(self, res: Resource, namespace: str | None) -> None:
        if res.kind == "Event" or (res.namespaced and namespace != "u"):
            raise ApiError(403, "Forbidden", f"cannot list {res.plural}")

    async def list(self, res: Resource, namespace: str | None = None, **_: Any) -> ObjectList:
        self._check(res, namespace)
        return ObjectList([o for o in self.objects if o["kind"] == res.kind and (
            namespace is None or o["metadata"].get("namespace") == namespace)], "1")

    async def watch(self, res: Resource, namespace: str | None = None, **kw: Any) -> AsyncIterator[WatchEvent]:
        self._check(res, namespace)
        kw["on_open"]()
        await asyncio.Event().wait()  # nothing changes
        yield  # type: ignore[misc]

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        raise ApiError(403, "Forbidden", f"cannot get {res.plural}")


@pytest.mark.parametrize("namespace", ["u", None])
async def test_a_namespace_only_user_sees_the_jobs_of_their_namespace(namespace: str | None) -> None:
    """Pods and PodGroups refused across namespaces are watched in the user's own (as `lapilli job why` reads
    them); without a namespace to fall back to the page has no jobs, only the partial banner."""
    dashboard = Dashboard(_NamespaceUser(), None, namespace)  # type: ignore[arg-type]
    await dashboard.start(sync_timeout_s=30)
    try:
        html = dashboard.render(True)
        gaps = [str(u) for u in dashboard.unreadable()]
    finally:
        await dashboard.stop()
    assert 'id="partial"' in html
    if namespace is None:
        assert "u/big" not in html
        assert "PodGroup (all namespaces): 403 Forbidden" in gaps
        return
    assert sorted(gaps) == ["ConfigMap (lapilli-system/lapilli-scheduler-conf): 403 Forbidden",
                            "Event (default (about Queues)): 403 Forbidden",
                            "Job (namespaces other than u): 403 Forbidden",
                            "Pod (namespaces other than u): 403 Forbidden",
                            "PodGroup (namespaces other than u): 403 Forbidden"]
    assert "u/big" in html and "other/run" not in html
    assert "needs nvidia.com/gpu 4; queue lab-a may never hold more than 2" in html  # its why, as job why says
    assert {r.resource.kind: r.namespace for r in dashboard.reflectors if r.resource.namespaced} == \
        {"Pod": "u", "PodGroup": "u"}


def test_shared_gpus_show_each_cards_memory() -> None:
    """vGPU (issue 18): a node registering two 80 GB cards, one holding a 20 GB pod; the Nodes table shows GPU
    memory per card (a column only when some node shares cards)."""
    register = "c0,10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:c1,10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:"
    s = {"nodes": [{"name": "g0", "annotations": {"volcano.sh/node-vgpu-register": register},
                    "alloc": {"cpu": "16", "memory": "64Gi", "volcano.sh/vgpu-number": "20",
                              "volcano.sh/vgpu-memory": "163840", "volcano.sh/vgpu-cores": "200"}}],
         "queues": [{"name": "default"}], "podgroups": [{"name": "u/nb", "min": 1, "phase": "Running"}],
         "pods": [{"name": "u/nb", "group": "nb", "node": "g0", "phase": "Running",
                   "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "20480"},
                   "annotations": {"volcano.sh/vgpu-ids-new": "c1,NVIDIA,20480,0:", "volcano.sh/vgpu-node": "g0"}}]}
    by_kind: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for doc in documents(s):
        by_kind.setdefault(doc["kind"], []).append(doc)
    conf = parse_scheduler_conf((SHIPPED.parents[2] / "examples" / "scheduler-conf-vgpu.yaml").read_text())
    page = build(build_view(by_kind), conf, "vgpu", {}, now=datetime(2026, 1, 1, tzinfo=UTC))
    (node,) = page.nodes
    assert [(c.used_gb, c.memory_gb, c.pods) for c in node.cards] == [(0, 80, 0), (20, 80, 1)]
    html = fragment(page)
    assert "GPU memory per card" in html and "20/80 GB · 1 pod" in html and "0/80 GB · 0 pods" in html
    assert "GPU memory per card" not in fragment(build(_view(), parse_scheduler_conf(SHIPPED.read_text()), "x", {},
                                                       now=datetime(2026, 1, 1, tzinfo=UTC)))
