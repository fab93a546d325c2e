"""Usage-decayed fair share in the engine: off unless configured (decisions byte-identical), the usage each queue
opens a session with, and the arguments refused when the conf loads."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from extender.engine.conf import ConfError
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import build_snapshot
from extender.engine.usage import FairShareArgs, allocations, decayed
from lapilli.usage import USAGE_ANNOTATION
from tests.unit.extender.engine.builders import documents, run
from tests.unit.extender.engine.test_scenarios import _cases

NOW = 1_704_672_000.0
RECORD = '{"at":"2024-01-08T00:00:00Z","halfLife":"168h","usage":{"nvidia.com/gpu":6840000,"cpu":720000}}'


def _other_rows() -> list[Any]:
    return [c for c in _cases() if not str(c.id).startswith("fairshare:")]


@pytest.mark.parametrize("scenario", _other_rows())
def test_usage_records_change_nothing_without_a_fairshare_entry(scenario: dict[str, Any]) -> None:
    """Every other scenario row, with a heavy usage record on every queue and a clock that decays it: the same
    decisions, byte for byte, as without the records."""
    plain = json.dumps(run(scenario).to_json(), sort_keys=True)
    marked = copy.deepcopy(scenario)
    marked["now"] = NOW + 86400
    for queue in marked.get("queues") or []:
        queue["annotations"] = {**(queue.get("annotations") or {}), USAGE_ANNOTATION: RECORD}
    assert json.dumps(run(marked).to_json(), sort_keys=True) == plain


TREE = {
    "nodes": [{"name": "n1", "alloc": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}}],
    "queues": [
        {"name": "lab-a", "annotations": {USAGE_ANNOTATION: RECORD}},
        {"name": "lab-a-alice", "parent": "lab-a"},
        {"name": "lab-a-bob", "parent": "lab-a"},
        {"name": "loop-1", "parent": "loop-2"},
        {"name": "loop-2", "parent": "loop-1"},
    ],
    "podgroups": [{"name": "a/x", "queue": "lab-a-alice", "min": 1}, {"name": "a/y", "queue": "lab-a-bob", "min": 1},
                  {"name": "a/z", "queue": "lab-a-bob", "min": 1}],
    "pods": [
        {"name": "a/x-0", "group": "x", "req": {"nvidia.com/gpu": "2"}, "node": "n1", "phase": "Running"},
        {"name": "a/y-0", "group": "y", "req": {"nvidia.com/gpu": "1"}, "node": "n1", "phase": "Running"},
        {"name": "a/y-1", "group": "y", "req": {"nvidia.com/gpu": "1"}, "node": "n1", "phase": "Succeeded"},
        {"name": "a/z-0", "group": "z", "req": {"nvidia.com/gpu": "1"}},
    ],
}


def test_what_a_queue_holds_counts_for_it_and_its_ancestors_and_a_cycle_ends_the_chain() -> None:
    snap = build_snapshot(documents(TREE))
    held = allocations(snap)
    assert held["lab-a-alice"]["nvidia.com/gpu"] == 2000.0
    assert held["lab-a-bob"]["nvidia.com/gpu"] == 1000.0  # neither the finished pod nor the pending one
    assert held["lab-a"]["nvidia.com/gpu"] == 3000.0
    usage = decayed(snap, FairShareArgs(half_life=168 * 3600.0, sampling_interval=1800.0), NOW + 3600)
    # lab-a: its record barely decayed in an hour, plus 3 GPUs for that hour (two sampling intervals: all of it
    # counts); the children have no record yet.
    assert usage["lab-a"]["nvidia.com/gpu"] == pytest.approx(6_840_000_000 * 2 ** (-1 / 168) + 3000 * 3600, rel=1e-3)
    assert usage["lab-a-alice"] == {} and usage["loop-1"] == {}


def test_a_record_that_cannot_be_read_counts_as_no_usage() -> None:
    broken = copy.deepcopy(TREE)
    broken["queues"][0]["annotations"] = {USAGE_ANNOTATION: "{not json"}
    snap = build_snapshot(documents(broken))
    assert snap.queues["lab-a"].usage is None and "not JSON" in snap.queues["lab-a"].usage_error
    conf = parse_scheduler_conf("actions: allocate\ntiers:\n- plugins: [{name: fairshare}, {name: gang}]")
    run_session(snap, conf, NOW)  # the session runs; the queue has used nothing


@pytest.mark.parametrize(("arguments", "error"), [
    ("{halfLife: 0s}", "halfLife: must be longer than 0s"),
    ("{halfLife: a week}", "halfLife: \"a week\" is not a duration"),
    ("{samplingInterval: 0.5s}", "samplingInterval"),
    ("{halfLife: 1h, samplingInterval: 2h}", "samplingInterval"),
    ("{resourceWeights: {nvidia.com/gpu: -1}}", "resourceWeights.nvidia.com/gpu"),
    ("{resourceWeights: {cpu: 0}}", "every weight is 0"),
    ("{resourceWeights: [cpu]}", "resourceWeights: expected a mapping"),
    ("{shareWeight: -0.5}", "shareWeight"),
    ("{queueOrder: sometimes}", "queueOrder"),
])
def test_arguments_are_refused_when_the_conf_loads(arguments: str, error: str) -> None:
    with pytest.raises(ConfError, match="plugin fairshare") as caught:
        parse_scheduler_conf(f"actions: allocate\ntiers:\n- plugins: [{{name: fairshare, arguments: {arguments}}}]")
    assert error in str(caught.value)
