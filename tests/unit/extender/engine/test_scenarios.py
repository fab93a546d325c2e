"""Scenario tables (tests/unit/extender/engine/scenarios/*.yaml): objects in, expected binds/evictions/pipelined/phases out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from extender.engine.session import Session
from lapilli.devices.assign import encode_pod_devices
from tests.unit.extender.engine.builders import opened, run

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def _cases() -> list[Any]:
    cases = []
    for path in SCENARIOS:
        for scenario in yaml.safe_load(path.read_text()):
            cases.append(pytest.param(scenario, id=f"{path.stem}: {scenario['name']}"))
    return cases


def _task(ssn: Session, key: str) -> Any:
    return next(t for t in ssn.tasks.values() if t.key == key)


def _check_tables(scenario: dict[str, Any]) -> None:
    """`filter`: per pod, each node's first refusal by the session's predicates ("" where it passes); `scores`:
    per pod, each node's score from the session's node orders over every node as candidates."""
    expect = scenario["expect"]
    ssn = opened(scenario)
    for key, nodes in (expect.get("filter") or {}).items():
        task = _task(ssn, key)
        got = {}
        for node in ssn.nodes:
            reasons = [r for pred in ssn.predicates.all() for r in pred.explain(task, node)]
            assert ssn.predicate_node(task, node) == (not reasons), (node.name, reasons)
            got[node.name] = reasons[0] if reasons else ""
        assert got == nodes, key
    for key, nodes in (expect.get("scores") or {}).items():
        task = _task(ssn, key)
        scores = ssn.scores(task, np.arange(len(ssn.nodes)))
        assert {n.name: float(s) for n, s in zip(ssn.nodes, scores, strict=True)} == nodes, key


@pytest.mark.parametrize("scenario", _cases())
def test_scenario(scenario: dict[str, Any]) -> None:
    expect = scenario["expect"]
    if "filter" in expect or "scores" in expect:
        _check_tables(scenario)
    result = run(scenario)
    if "binds" in expect:
        assert result.binds == (expect["binds"] or {})
    if "bind_count" in expect:  # Volcano's ExpectBindsNum where ties leave the nodes open
        assert len(result.binds) == expect["bind_count"], result.binds
    if "evict_count" in expect:
        assert len(result.evictions) == expect["evict_count"], result.evictions
    if "evictions" in expect:
        assert sorted(result.evictions) == sorted(expect["evictions"] or [])
    if "pipelined" in expect:
        assert result.pipelined == (expect["pipelined"] or {})
    for key in expect.get("dropped") or []:  # a PodGroup whose queue does not exist leaves the session
        assert key not in result.podgroups, key
    for key, kinds in (expect.get("conditions") or {}).items():  # the condition types the PodGroup ends with
        assert [c.type for c in result.podgroups[key].conditions] == kinds, key
    for key, phase in (expect.get("phases") or {}).items():
        assert result.podgroups[key].phase == phase, key
    for key, text in (expect.get("messages") or {}).items():  # words the gang's fit error must contain
        assert text in result.podgroups[key].status.message, (key, result.podgroups[key].status)
    for key, code in (expect.get("codes") or {}).items():  # kube-scheduler's Status code of the gang's outcome
        assert result.podgroups[key].status.code.value == code, (key, result.podgroups[key].status)
    for key, counts in (expect.get("counts") or {}).items():  # the typed result's ready/pending/task counts
        pg = result.podgroups[key]
        assert {k: getattr(pg, k) for k in counts} == counts, key
    if "nominations" in expect:  # PodGroup -> sub-gang -> the HyperNode gang eviction nominated
        assert result.nominations == (expect["nominations"] or {})
    if "devices" in expect:  # each placed pod's cards, as volcano.sh/vgpu-ids-new writes them
        assert {k: encode_pod_devices(v) for k, v in result.devices.items()} == (expect["devices"] or {})
    for name, allocated in (expect.get("allocated") or {}).items():  # the queue's status, the entries named
        shown = result.to_json()["queues"][name]["allocated"]
        assert {k: shown.get(k) for k in allocated} == allocated, (name, shown)
    for name, deserved in (expect.get("deserved") or {}).items():
        assert result.to_json()["queues"][name]["deserved"] == deserved, name
