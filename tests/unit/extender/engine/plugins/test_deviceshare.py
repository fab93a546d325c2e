"""The deviceshare plugin: argument parsing, and invariants over random clusters of shared cards.

* The node-local caches agree with a fresh fit: after random placements, pipelines, evictions and undos, every
  pending vGPU task's class cache equals its fit evaluated from scratch on a ledger rebuilt from what holds cards,
  and `choose` picks the node the masks-then-argmax computation picks.
* Sessions never over-fill a card: in the cards pods hold after a session (running pods' annotations plus the
  session's assignments), no card holds more MB than it has, more pods than its split, more than 100 % of cores,
  and no MIG slice twice; every bound vGPU pod was given one card per asked card; a gang binds whole or not at all;
  the session's card report lists those cards' use.
* A discarded Statement gives its cards back: the ledgers after it equal the ledgers before it.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.engine.arguments import ConfError
from extender.engine.conf import parse_conf
from extender.engine.model import TaskStatus
from extender.engine.plugins.deviceshare import CardFit, DeviceSharePlugin, parse_arguments
from extender.engine.run import open_session, registry, run_session
from extender.engine.session import Session
from extender.engine.snapshot import build_snapshot
from extender.engine.statement import Statement
from lapilli.devices.cards import NOW, CardLedger
from tests.unit.extender.engine.builders import documents
from tests.unit.extender.engine.reference import reference_fit_error
from tests.unit.lapilli.devices.helpers import A100_40GB_MIG

MIG_CONFIG = A100_40GB_MIG


def test_arguments():
    args = parse_arguments({"deviceshare.VGPUEnable": True, "deviceshare.SchedulePolicy": "binpack",
                            "deviceshare.ScheduleWeight": 10, "deviceshare.GPUExclusiveRules": [{"a": "b", "n": 1}, {}],
                            "deviceshare.KnownGeometriesCMName": "cm", "deviceshare.KnownGeometriesCMNamespace": "ns"})
    assert (args.vgpu, args.policy, args.weight, args.rules, args.config_key) == (
        True, "binpack", 10, ((("a", "b"),),), "ns/cm")
    assert parse_arguments({}).vgpu is False
    assert parse_arguments({"deviceshare.NodeLockEnable": False}).vgpu is False


@pytest.mark.parametrize(("arguments", "message"), [
    ({"deviceshare.SchedulePolicy": "pack"}, "binpack or spread"),
    ({"deviceshare.GPUSharingEnable": True}, "not supported"),
    ({"deviceshare.NodeLockEnable": "true"}, "not supported"),
    ({"deviceshare.GPUExclusiveRules": "a=b"}, "list of label maps"),
    ({"deviceshare.ScheduleWeight": "x"}, "not an integer"),
])
def test_bad_arguments(arguments, message):
    with pytest.raises(ConfError, match=message):
        parse_arguments(arguments)


ASKS = [
    {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"},
    {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "12000", "volcano.sh/vgpu-cores": "30"},
    {"volcano.sh/vgpu-number": "2", "volcano.sh/vgpu-memory": "8000"},
    {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": "100"},
    {"volcano.sh/vgpu-memory": "20000"},
    {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory-percentage": "50"},
]
ANNOTATIONS = [{}, {"volcano.sh/vgpu-podgroup-policy": "spread"}, {"volcano.sh/vgpu-nouse-gpuuuid": "n0-c0"},
               {"volcano.sh/vgpu-use-gpuuuid": "n1-c1,n0-c1"}, {"volcano.sh/vgpu-mode": "mig"}]


def _node(draw: st.DrawFn, i: int) -> dict[str, Any]:
    mig = draw(st.booleans())
    cards = draw(st.integers(1, 3))
    memory = 40960 if mig else draw(st.sampled_from([16384, 24576]))
    split = draw(st.sampled_from([2, 4, 10]))
    kind = "mig" if mig else "hami-core"
    register = "".join(f"n{i}-c{c},{split},{memory},NVIDIA-A100-SXM4-40GB,{str(c != 2).lower()},{kind}:"
                       for c in range(cards))
    return {"name": f"n{i}", "annotations": {"volcano.sh/node-vgpu-register": register},
            "alloc": {"cpu": "16", "memory": "64Gi", "volcano.sh/vgpu-number": str(cards * split),
                      "volcano.sh/vgpu-memory": str(cards * memory), "volcano.sh/vgpu-cores": str(cards * 100)}}


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    nodes = [_node(draw, i) for i in range(draw(st.integers(1, 4)))]
    pods, podgroups = [], []
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 3))
        podgroups.append({"name": f"ns/g{j}", "queue": "q", "min": draw(st.integers(1, size))})
        annotations = draw(st.sampled_from(ANNOTATIONS))
        for t in range(size):
            pods.append({"name": f"ns/g{j}-t-{t}", "group": f"g{j}", "limits": draw(st.sampled_from(ASKS)),
                         "annotations": dict(annotations), "labels": {"kind": draw(st.sampled_from("ab"))}})
    policy = draw(st.sampled_from(["", "binpack", "spread"]))
    arguments = {"deviceshare.VGPUEnable": True, "deviceshare.SchedulePolicy": policy,
                 "deviceshare.ScheduleWeight": draw(st.sampled_from([0, 1])),
                 "deviceshare.GPUExclusiveRules": [{"kind": "a"}]}
    plugins = [{"name": "gang"}, {"name": "predicates"}, {"name": "deviceshare", "arguments": arguments}]
    return {
        "conf": {"actions": "allocate", "tiers": [{"plugins": plugins}]},
        "configmaps": [{"name": "kube-system/volcano-vgpu-device-config", "data": {"device-config.yaml": MIG_CONFIG}}],
        "nodes": nodes,
        "queues": [{"name": "q"}],
        "podgroups": podgroups,
        "pods": pods,
    }


def _open(cluster: dict[str, Any]) -> Session:
    return open_session(build_snapshot(documents(cluster)), parse_conf(cluster["conf"], registry()))


def _card_fit(ssn: Session) -> CardFit:
    plugin = ssn.plugin("deviceshare")
    assert isinstance(plugin, DeviceSharePlugin) and plugin.fit is not None
    return plugin.fit


def _fresh(ssn: Session, fit: CardFit, task: Any, row: int) -> tuple[bool, bool, float]:
    """The task's fit on node `row`, from a ledger rebuilt from what holds cards there, with no memo."""
    ledger = fit.ledgers[row]
    if ledger is None:
        return False, False, 0.0
    copy = CardLedger(ledger.cards)
    for uid, hold in ledger.pods.items():
        copy.pods[uid] = hold
    fresh = CardFit(fit.args, fit.config, fit.filters, fit.scores)
    fresh.ledgers = [copy if i == row else None for i in range(len(fit.ledgers))]
    return fresh.evaluate(task, row)


def _check(ssn: Session) -> None:
    fit = _card_fit(ssn)
    for task in ssn.tasks.values():
        assert ssn.fit_error(task) == reference_fit_error(ssn, task), task.key
        if task.status is not TaskStatus.PENDING or task.device_ask is None:
            continue
        entry = ssn.placement.entry(task)
        for node in ssn.nodes:
            now, future, _ = _fresh(ssn, fit, task, node.idx)
            arrays = ssn.arrays
            fits_idle = bool(np.all(task.resreq < arrays.allocatable[node.idx] - arrays.used[node.idx] + 0.1))
            future_row = arrays.future_idle_row(node.idx)
            fits_future = bool(np.all(task.resreq < future_row + 0.1))
            assert bool(entry.fit_idle[node.idx]) == (fits_idle and now), (task.key, node.name)
            assert bool(entry.fit_future[node.idx]) == (fits_future and future), (task.key, node.name)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), data=st.data())
def test_caches_match_a_fresh_fit(cluster: dict[str, Any], data: st.DataObject) -> None:
    ssn = _open(cluster)
    tasks = sorted(ssn.tasks.values(), key=lambda t: t.uid)
    _check(ssn)
    for _ in range(data.draw(st.integers(0, 10))):
        task = data.draw(st.sampled_from(tasks))
        if task.status is TaskStatus.PENDING:
            choice = ssn.choose(task)
            if choice is None:
                continue
            node, idle = choice
            ssn._place(task, node, TaskStatus.ALLOCATED if idle else TaskStatus.PIPELINED)
        elif task.status is TaskStatus.ALLOCATED and data.draw(st.booleans()):
            ssn._set_status(task, TaskStatus.RUNNING)
            ssn._release(task)
        elif task.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
            ssn._unplace(task)
        _check(ssn)


def _ledger_state(fit: CardFit) -> list[Any]:
    return [None if ledger is None else sorted((u, h.kind, h.holdings) for u, h in ledger.pods.items())
            for ledger in fit.ledgers]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters())
def test_a_discarded_statement_gives_its_cards_back(cluster: dict[str, Any]) -> None:
    ssn = _open(cluster)
    fit = _card_fit(ssn)
    before = _ledger_state(fit)
    stmt = Statement(ssn)
    for task in sorted(ssn.tasks.values(), key=lambda t: t.uid):
        choice = ssn.choose(task)
        if choice is not None:
            (stmt.allocate if choice[1] else stmt.pipeline)(task, choice[0])
    stmt.discard()
    assert _ledger_state(fit) == before
    assert not ssn.assignments


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters())
def test_a_session_never_overfills_a_card(cluster: dict[str, Any]) -> None:
    snapshot = build_snapshot(documents(cluster))
    conf = parse_conf(cluster["conf"], registry())
    result = run_session(snapshot, conf)
    ssn = _open(cluster)  # the same cards, to count the session's assignments on
    fit = _card_fit(ssn)
    for key, node in result.binds.items():
        pod = snapshot.pods[key]
        ledger = fit.ledgers[fit.row_of[node]]
        assert ledger is not None, key
        assert ledger.hold(pod.uid, result.devices[key]) == []
        asks = ssn.tasks[pod.uid].device_ask
        assert asks is not None
        assert [len(c) for c in result.devices[key]] == [a.nums for a in asks.containers]
    for ledger in fit.ledgers:
        if ledger is None:
            continue
        for (used, memory, pods, split), card in zip(ledger.summary(NOW), ledger.cards.cards, strict=True):
            assert used <= memory and pods <= split, (ledger.cards.node, card.index)
        usage = ledger.usage(NOW)
        assert all(cores <= 100 for cores in usage.cores)
        slots = [h.slot for hold in ledger.pods.values() for h in hold.holdings if h.slot is not None]
        assert len(slots) == len(set(zip(slots, [h.card for hold in ledger.pods.values() for h in hold.holdings
                                                   if h.slot is not None], strict=True)))
    for key, pg in result.podgroups.items():
        bound = [k for k in result.binds if snapshot.pods[k].group == key.split("/")[1]]
        assert not bound or len(bound) >= pg.min_member
    # The card report (made when read) counts the same cards, and crosses a pipe as the plain dict it stands for.
    expected = {ledger.cards.node: tuple((card.uuid, *row) for card, row in zip(
        ledger.cards.cards, ledger.summary(NOW), strict=True)) for ledger in fit.ledgers if ledger is not None}
    assert dict(result.cards) == expected
    assert pickle.loads(pickle.dumps(result.cards)) == expected
    assert type(pickle.loads(pickle.dumps(result.cards))) is dict


def test_devices_of_a_fit_name_the_nodes_own_cards():
    cluster = {
        "conf": {"actions": "allocate", "tiers": [{"plugins": [
            {"name": "gang"}, {"name": "predicates"},
            {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True}}]}]},
        "nodes": [{"name": "n0", "annotations": {"volcano.sh/node-vgpu-register": "n0-c0,4,16384,NVIDIA,true,hami-core:"},
                   "alloc": {"volcano.sh/vgpu-number": "4", "volcano.sh/vgpu-memory": "16384",
                             "volcano.sh/vgpu-cores": "100"}},
                  {"name": "n1", "annotations": {"volcano.sh/node-vgpu-register": "n1-c0,4,16384,NVIDIA,true,hami-core:"},
                   "alloc": {"volcano.sh/vgpu-number": "4", "volcano.sh/vgpu-memory": "16384",
                             "volcano.sh/vgpu-cores": "100"}}],
        "queues": [{"name": "q"}],
        "podgroups": [{"name": "ns/g", "queue": "q", "min": 8}],
        "pods": [{"name": f"ns/g-t-{i}", "group": "g", "limits": {"volcano.sh/vgpu-memory": "4096"}} for i in range(8)],
    }
    result = run_session(build_snapshot(documents(cluster)), parse_conf(cluster["conf"], registry()))
    assert len(result.binds) == 8
    for key, node in result.binds.items():
        assert result.devices[key][0][0].uuid == f"{node}-c0"  # two nodes of one shape share fits, not card names


def _one_card_node(name: str, memory: int = 81920) -> dict[str, Any]:
    return {"name": name, "annotations": {"volcano.sh/node-vgpu-register": f"{name}-c0,10,{memory},NVIDIA,true,hami-core:"},
            "alloc": {"cpu": "16", "volcano.sh/vgpu-number": "100", "volcano.sh/vgpu-memory": "1000000",
                      "volcano.sh/vgpu-cores": "1000"}}


def _running(name: str, group: str, node: str, memory: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "group": group, "node": node, "phase": "Running",
            "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)},
            "annotations": {"volcano.sh/vgpu-ids-new": f"{node}-c0,NVIDIA,{memory},0:", "volcano.sh/vgpu-node": node,
                            **(annotations or {})}}


def _conf(**arguments: object) -> dict[str, Any]:
    return {"actions": "allocate", "tiers": [{"plugins": [
        {"name": "gang"}, {"name": "predicates"},
        {"name": "deviceshare", "arguments": {"deviceshare.VGPUEnable": True, **arguments}}]}]}


def test_nodes_alike_but_for_whose_pods_hold_their_cards_are_told_apart():
    """Two nodes in the same numbers, whose card holds a pod of a different PodGroup each: a spread pod of one group
    fits only the other node (the memo must not share their evaluation)."""
    spread = {"volcano.sh/vgpu-podgroup-policy": "spread"}
    cluster = {
        "conf": _conf(),
        "nodes": [_one_card_node("n0"), _one_card_node("n1")],
        "queues": [{"name": "q"}],
        "podgroups": [{"name": "ns/g1", "queue": "q", "min": 1, "phase": "Running"},
                      {"name": "ns/g2", "queue": "q", "min": 1, "phase": "Running"}],
        "pods": [_running("ns/g1-a", "g1", "n0", 3000, spread), _running("ns/g2-a", "g2", "n1", 3000, spread),
                 {"name": "ns/g1-b", "group": "g1", "annotations": spread,
                  "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"}},
                 {"name": "ns/g2-b", "group": "g2", "annotations": spread,
                  "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"}}],
    }
    result = run_session(build_snapshot(documents(cluster)), parse_conf(cluster["conf"], registry()))
    assert result.binds == {"ns/g1-b": "n1", "ns/g2-b": "n0"}


def test_an_evicted_pods_slice_is_free_only_for_a_pipelined_pod():
    cluster = {
        "conf": _conf(),
        "nodes": [_one_card_node("n0")],
        "queues": [{"name": "q"}],
        "podgroups": [{"name": "ns/old", "queue": "q", "min": 1, "phase": "Running"},
                      {"name": "ns/new", "queue": "q", "min": 1}],
        "pods": [_running("ns/old-a", "old", "n0", 61440),
                 {"name": "ns/new-a", "group": "new",
                  "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "40960"}}],
    }
    ssn = _open(cluster)
    old, new = ssn.tasks["ns-old-a"], ssn.tasks["ns-new-a"]
    assert ssn.choose(new) is None
    ssn._release(old)
    choice = ssn.choose(new)
    assert choice is not None and choice[1] is False  # pipelined onto the slice being released, not allocated
    ssn._unrelease(old, TaskStatus.RUNNING)
    assert ssn.choose(new) is None
