"""The HyperNode controller over an in-memory API: node counts written only when they change and recomputed when
nodes come and go, discovery switched by its ConfigMap and following relabelled and deleted nodes, hand-made
HyperNodes left alone, a refused write retried (the pass reports it), nothing done before the caches listed."""

from __future__ import annotations

import copy
import random
from typing import Any

import jsonpatch
import pytest
from prometheus_client import CollectorRegistry

from controller.context import Context
from controller.hypernodes.controller import DISCOVER, DiscoveryIncomplete, HyperNodeController, NotSynced
from controller.hypernodes.labels import discover
from controller.metrics import ControllerMetrics
from controller.settings import ControllerSettings
from lapilli.cluster import Event
from lapilli.kube import ApiError, Conflict, NotFound

LEAF, SPINE, SOURCE = "topology.lapilli.io/leaf", "topology.lapilli.io/spine", "volcano.sh/network-topology-source"
CONF = f"""
networkTopologyDiscovery:
- source: label
  enabled: true
  config:
    networkTopologyTypes:
      dev: [{{nodeLabel: {SPINE}}}, {{nodeLabel: {LEAF}}}, {{nodeLabel: kubernetes.io/hostname}}]
"""


class Api:
    """HyperNodes as the API server keeps them: resourceVersions, preconditions, and a webhook that may refuse."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.rv = 100
        self.writes: list[tuple[str, str]] = []
        self.refuse: set[str] = set()

    def _stored(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        self.objects[obj["metadata"]["name"]] = obj
        return copy.deepcopy(obj)

    async def create(self, res: Any, obj: dict[str, Any]) -> dict[str, Any]:
        name = obj["metadata"]["name"]
        self.writes.append(("create", name))
        if name in self.refuse:
            raise ApiError(400, "BadRequest", f"denied {name}")
        return self._stored(copy.deepcopy(obj))

    async def patch(self, res: Any, name: str, ops: list[dict[str, Any]], *, patch_type: str) -> dict[str, Any]:
        assert patch_type == "json"
        self.writes.append(("patch", name))
        try:
            obj = jsonpatch.apply_patch(self.objects[name], ops)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise ApiError(422, "Invalid", str(exc)) from None
        return self._stored(obj)

    async def patch_status(self, res: Any, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("status", name))
        if name not in self.objects:
            raise NotFound(404, "NotFound", name)
        obj = copy.deepcopy(self.objects[name])
        obj["status"] = {**obj.get("status", {}), **patch["status"]}
        return self._stored(obj)

    async def delete(self, res: Any, name: str, *, uid: str | None = None, resource_version: str | None = None) -> Any:
        self.writes.append(("delete", name))
        current = self.objects.get(name)
        if current is None:
            raise NotFound(404, "NotFound", name)
        if resource_version and resource_version != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "stale")
        del self.objects[name]
        return {}


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "labels": labels}}


def setup(synced: bool = True) -> tuple[HyperNodeController, Api]:
    api = Api()
    ctx = Context(api, ControllerSettings(), None, ControllerMetrics(CollectorRegistry()))  # type: ignore[arg-type]
    return HyperNodeController(ctx, synced=lambda: synced, rng=random.Random(0)), api


def add_node(ctl: HyperNodeController, obj: dict[str, Any], old: dict[str, Any] | None = None) -> None:
    event = Event("MODIFIED" if old else "ADDED", obj, old)
    ctl.ctx.nodes.observe(event.type, obj)
    ctl.on_node(event)


def add_hypernode(ctl: HyperNodeController, api: Api, obj: dict[str, Any]) -> None:
    stored = api._stored(copy.deepcopy(obj))
    ctl.ctx.hypernodes.observe("ADDED", stored)
    ctl.on_hypernode(Event("ADDED", stored))


async def drain(ctl: HyperNodeController) -> list[Any]:
    """Process every queued key once (as a worker would), returning the exceptions raised."""
    errors = []
    while len(ctl.queue):
        key = await ctl.queue.get()
        try:
            await ctl._process(key)
        except Exception as exc:
            errors.append(exc)
        finally:
            ctl.queue.done(key)
    return errors


def tree(api: Api) -> dict[tuple[int, str], list[str]]:
    """(tier, label value) -> members, members as label values where they are HyperNodes."""
    value = {n: next(v for k, v in o["metadata"]["labels"].items() if k != SOURCE) for n, o in api.objects.items()}
    return {(o["spec"]["tier"], value[n]): sorted(value.get(m["selector"]["exactMatch"]["name"],
                                                             m["selector"]["exactMatch"]["name"])
                                                   for m in o["spec"]["members"])
            for n, o in api.objects.items() if o["metadata"]["labels"].get(SOURCE) == "label"}


def configure(ctl: HyperNodeController, text: str | None = CONF) -> None:
    cm = {"metadata": {"name": "volcano-controller-configmap", "namespace": "lapilli-system"},
          "data": {} if text is None else {"volcano-controller.conf": text}}
    ctl.on_config(Event("ADDED", cm))


# --- status.nodeCount ------------------------------------------------------------------------------------------


async def test_node_count_follows_the_nodes_a_regex_member_selects():
    ctl, api = setup()
    regex = {"metadata": {"name": "gpus"}, "spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-"}}}]}}
    add_hypernode(ctl, api, regex)
    await drain(ctl)
    assert api.writes == []  # 0 nodes, and the count reads 0 already
    add_node(ctl, node("gpu-0"))
    add_node(ctl, node("gpu-1"))
    add_node(ctl, node("cpu-0"))
    await drain(ctl)
    assert api.objects["gpus"]["status"]["nodeCount"] == 2 and api.writes == [("status", "gpus")]
    ctl.ctx.nodes.observe("DELETED", node("gpu-1"))
    ctl.on_node(Event("DELETED", node("gpu-1")))
    await drain(ctl)
    assert api.objects["gpus"]["status"]["nodeCount"] == 1
    add_node(ctl, node("gpu-0", rack="r1"), old=node("gpu-0"))  # a relabel that changes no count writes nothing
    await drain(ctl)
    assert len(api.writes) == 2


async def test_nothing_is_done_before_the_caches_listed():
    ctl, api = setup(synced=False)
    add_hypernode(ctl, api, {"metadata": {"name": "a"}, "spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}]}})
    errors = await drain(ctl)
    assert [type(e) for e in errors] == [NotSynced] and api.writes == []


# --- discovery -------------------------------------------------------------------------------------------------


def cluster(ctl: HyperNodeController) -> None:
    for i in range(4):
        add_node(ctl, node(f"node-{i}", **{SPINE: f"spine-{i // 2}", LEAF: f"leaf-{i}"}))


async def test_discovery_makes_the_tree_and_follows_relabelled_and_deleted_nodes():
    ctl, api = setup()
    cluster(ctl)
    await drain(ctl)
    assert api.objects == {}  # no ConfigMap: discovery is off
    configure(ctl)
    assert await drain(ctl) == []
    assert tree(api) == {(1, f"leaf-{i}"): [f"node-{i}"] for i in range(4)} | {
        (2, "spine-0"): ["leaf-0", "leaf-1"], (2, "spine-1"): ["leaf-2", "leaf-3"]}
    created = dict(api.objects)
    # node-1 moves under leaf-0 (its leaf empties and goes); node-3 is deleted (leaf-3 goes, spine-1 shrinks)
    add_node(ctl, node("node-1", **{SPINE: "spine-0", LEAF: "leaf-0"}), old=ctl.ctx.nodes.get("node-1"))
    gone = ctl.ctx.nodes.get("node-3")
    ctl.ctx.nodes.observe("DELETED", gone)
    ctl.on_node(Event("DELETED", gone))
    assert await drain(ctl) == []
    assert tree(api) == {(1, "leaf-0"): ["node-0", "node-1"], (1, "leaf-2"): ["node-2"],
                         (2, "spine-0"): ["leaf-0"], (2, "spine-1"): ["leaf-2"]}
    assert set(api.objects) < set(created)  # the survivors kept their names
    writes = len(api.writes)
    ctl.queue.add(DISCOVER)
    await drain(ctl)
    assert len(api.writes) == writes  # in step: a pass writes nothing


async def test_hand_made_hypernodes_are_left_alone():
    ctl, api = setup()
    cluster(ctl)
    by_hand = {"metadata": {"name": "rack-a", "labels": {LEAF: "leaf-0"}}, "spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"exactMatch": {"name": "node-9"}}}]}}
    add_hypernode(ctl, api, by_hand)
    configure(ctl)
    await drain(ctl)
    assert api.objects["rack-a"]["spec"] == by_hand["spec"] and ("patch", "rack-a") not in api.writes
    assert ("delete", "rack-a") not in api.writes and len(tree(api)) == 6


async def test_a_refused_write_fails_the_pass_and_the_rest_still_goes_through():
    ctl, api = setup()
    cluster(ctl)
    configure(ctl)
    assert ctl.config is not None
    # The names the first pass picks (the controller's random source is seeded alike).
    first = sorted(discover(ctl.config, ctl.ctx.nodes.values(), [], random.Random(0)))[0]
    api.refuse = {first}
    errors = await drain(ctl)
    assert [type(e) for e in errors] == [DiscoveryIncomplete] and f"create {first}: denied {first}" in str(errors[0])
    assert len(api.objects) == 5  # every other HyperNode was made
    api.refuse = set()
    ctl.queue.add(DISCOVER)
    assert await drain(ctl) == [] and len(tree(api)) == 6


async def test_the_configmap_switches_discovery_off_and_a_broken_one_too(caplog):
    ctl, api = setup()
    cluster(ctl)
    configure(ctl)
    assert ctl.config is not None
    configure(ctl, "networkTopologyDiscovery: {")
    assert ctl.config is None and "is not YAML" in caplog.text
    configure(ctl, None)
    assert ctl.config is None and "has no key volcano-controller.conf" in caplog.text
    await drain(ctl)
    assert api.objects == {}


@pytest.mark.parametrize("event_type", ["MODIFIED", "DELETED"])
async def test_a_discovered_hypernode_changed_or_deleted_by_someone_else_is_restored(event_type):
    ctl, api = setup()
    cluster(ctl)
    configure(ctl)
    await drain(ctl)
    name = next(n for n, o in api.objects.items() if o["spec"]["tier"] == 1)
    current = api.objects[name]
    if event_type == "DELETED":
        del api.objects[name]
        ctl.ctx.hypernodes.observe("DELETED", current)
        ctl.on_hypernode(Event("DELETED", current))
    else:
        edited = copy.deepcopy(current)
        edited["spec"]["members"] = [{"type": "Node", "selector": {"exactMatch": {"name": "node-7"}}}]
        stored = api._stored(edited)
        ctl.ctx.hypernodes.observe("MODIFIED", stored)
        ctl.on_hypernode(Event("MODIFIED", stored, current))
    assert await drain(ctl) == []
    assert len(tree(api)) == 6 and all(o["spec"]["members"] for o in api.objects.values())


async def test_a_hypernode_taken_over_meanwhile_is_not_overwritten():
    """Someone removes discovery's label (adopting the HyperNode) after the pass read it: the patch's test fails."""
    ctl, api = setup()
    cluster(ctl)
    configure(ctl)
    await drain(ctl)
    leaf = next(n for n, o in api.objects.items() if o["metadata"]["labels"].get(LEAF) == "leaf-0")
    del api.objects[leaf]["metadata"]["labels"][SOURCE]  # the store still has the labelled copy
    add_node(ctl, node("node-0", **{SPINE: "spine-0", LEAF: "leaf-0"}, rack="r"),
             old=node("node-0", **{SPINE: "spine-0", LEAF: "leaf-0"}))
    add_node(ctl, node("node-5", **{SPINE: "spine-0", LEAF: "leaf-0"}))
    errors = await drain(ctl)
    assert [type(e) for e in errors] == [DiscoveryIncomplete] and f"update {leaf}" in str(errors[0])
    assert [m["selector"]["exactMatch"]["name"] for m in api.objects[leaf]["spec"]["members"]] == ["node-0"]
