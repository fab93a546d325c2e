"""The dashboard's network topology: the HyperNode tree top down with each domain's free GPUs (from the same session
as the nodes' GPU use), a tree the scheduler cannot use said so, and no section at all without HyperNodes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from assembly.dashboard.page import build
from assembly.dashboard.render import fragment
from assembly.dashboard.topology import DomainRow, topology
from assembly.why.gather import build_view
from extender.engine.run import parse_scheduler_conf
from tests.unit.extender.engine.builders import documents
from tests.unit.extender.engine.explain.test_explain import SHIPPED, gang, gpu_nodes, scenario


def hypernode(name: str, tier: int, *members: str, kind: str = "Node", tier_name: str = "") -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": tier_name, "members": [
                {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}


TREE = [hypernode("leaf-a", 1, "n0", "n1", tier_name="leaf"), hypernode("leaf-b", 1, "n2", "n3", tier_name="leaf"),
        hypernode("spine", 2, "leaf-a", "leaf-b", kind="HyperNode", tier_name="spine")]
NODES = {f"n{i}": {"metadata": {"name": f"n{i}"}} for i in range(4)}


def test_the_tree_top_down_with_free_gpus_per_domain():
    used = {"n0": (8.0, 8.0), "n1": (2.0, 8.0), "n2": (0.0, 8.0), "n3": (0.0, 8.0)}
    tree = topology(TREE, NODES, used)
    assert tree is not None and tree.conflicts == [] and tree.warnings == []
    assert tree.domains == [DomainRow("spine", 0, 2, "spine", 4, 22.0, 32.0),
                            DomainRow("leaf-a", 1, 1, "leaf", 2, 6.0, 16.0),
                            DomainRow("leaf-b", 1, 1, "leaf", 2, 16.0, 16.0)]


def test_no_hypernode_no_topology():
    assert topology([], NODES, {}) is None


def test_a_tree_the_scheduler_cannot_use_is_said_so():
    two_parents = [*TREE, hypernode("spine-2", 2, "leaf-a", kind="HyperNode")]
    tree = topology(two_parents, NODES, {})
    assert tree is not None and len(tree.conflicts) == 1 and "leaf-a" in tree.conflicts[0]


def _view(hypernodes: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
    s = scenario(gang("u/run", 2, "q", running_on="n0"), nodes=gpu_nodes(2), queues=[{"name": "q"}])
    by_kind: dict[str, list[dict]] = {"HyperNode": hypernodes}  # type: ignore[type-arg]
    for doc in documents(s):
        by_kind.setdefault(doc["kind"], []).append(doc)
    return build_view(by_kind)


def test_the_page_shows_the_tree_with_the_sessions_free_gpus():
    conf = parse_scheduler_conf(SHIPPED.read_text())
    tree = [hypernode("leaf-0", 1, "n0", tier_name="leaf"), hypernode("leaf-1", 1, "n1", tier_name="leaf"),
            hypernode("spine-0", 2, "leaf-0", "leaf-1", kind="HyperNode", tier_name="spine")]
    page = build(_view(tree), conf, "shipped", {}, now=datetime(2026, 1, 1, tzinfo=UTC))
    gpus = {n.name: (n.gpus_used, n.gpus) for n in page.nodes}
    assert page.topology is not None
    free = {d.name: (d.gpus_free, d.gpus) for d in page.topology.domains}
    assert free == {"spine-0": (8 - gpus["n0"][0] - gpus["n1"][0], 8), "leaf-0": (4 - gpus["n0"][0], 4),
                    "leaf-1": (4 - gpus["n1"][0], 4)} and gpus["n0"][0] == 2
    html = fragment(page)
    assert '<table id="topology">' in html and "spine-0" in html and "2 free / 4" in html
    assert html.index("spine-0") < html.index("leaf-0") < html.index("leaf-1")
    assert "Network topology" not in fragment(build(_view([]), conf, "shipped", {}))
