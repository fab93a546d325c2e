"""overcommit plugin: the enqueue gate on total × factor − used, against what is already admitted."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from extender.engine.arguments import ConfError
from extender.engine.conf import parse_conf
from extender.engine.plugins.overcommit import OVERUSED_MESSAGE, OvercommitPlugin, parse_arguments
from extender.engine.run import open_session, registry
from extender.engine.session import Session
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import documents, run


def _conf(**arguments: Any) -> dict[str, Any]:
    overcommit: dict[str, Any] = {"name": "overcommit", "enableJobEnqueued": True}
    if arguments:
        overcommit["arguments"] = arguments
    return {"actions": "enqueue", "tiers": [{"plugins": [overcommit]}]}


def _job(name: str, cpu: str | None, phase: str = "Pending", **extra: Any) -> dict[str, Any]:
    group: dict[str, Any] = {"name": name, "queue": "q1", "min": 1, "phase": phase, **extra}
    if cpu is not None:
        group["minResources"] = {"cpu": cpu}
    return group


def _scenario(groups: list[dict[str, Any]], pods: list[dict[str, Any]] | None = None, **args: Any) -> dict[str, Any]:
    pods = pods if pods is not None else []
    for group in groups:
        ns, name = group["name"].split("/")
        if not any(p.get("group") == name for p in pods):
            pods.append({"name": f"{ns}/{name}-0", "group": name, "req": {"cpu": "1"}})
    return {
        "conf": _conf(**args),
        "nodes": [{"name": "n1", "alloc": {"cpu": "10", "memory": "10G"}}],
        "queues": [{"name": "q1"}],
        "podgroups": groups,
        "pods": pods,
    }


def _phases(scenario: dict[str, Any]) -> dict[str, str]:
    return {key: pg.phase for key, pg in run(scenario).podgroups.items()}


def _session(scenario: dict[str, Any]) -> Session:
    return open_session(build_snapshot(documents(scenario)), parse_conf(scenario["conf"], registry()))


def test_default_factor_admits_up_to_one_point_two_times_the_cluster() -> None:
    groups = [_job("ns/a", "5"), _job("ns/b", "5"), _job("ns/c", "3"), _job("ns/d", "2")]
    # 10 cpu × 1.2 = 12: a (5) and b (10) fit, c (13) does not, d (12) still does — the bound is inclusive.
    assert _phases(_scenario(groups)) == {"ns/a": "Inqueue", "ns/b": "Inqueue", "ns/c": "Pending", "ns/d": "Inqueue"}


def test_larger_factor_admits_more() -> None:
    groups = [_job("ns/a", "5"), _job("ns/b", "5"), _job("ns/c", "5")]
    phases = _phases(_scenario(groups, **{"overcommit-factor": 1.5}))
    assert set(phases.values()) == {"Inqueue"}


@pytest.mark.parametrize("factor", [0.5, 0.99])
def test_factor_below_one_falls_back_to_default(factor: float) -> None:
    assert OvercommitPlugin(parse_arguments({"overcommit-factor": factor})).factor == 1.2
    groups = [_job("ns/a", "6"), _job("ns/b", "6"), _job("ns/c", "1")]
    assert _phases(_scenario(groups, **{"overcommit-factor": factor}))["ns/c"] == "Pending"


def test_factor_must_be_a_number_when_the_conf_is_loaded() -> None:
    with pytest.raises(ConfError) as caught:
        parse_conf(_conf(**{"overcommit-factor": "lots"}), registry())
    assert str(caught.value) == 'plugin overcommit: argument overcommit-factor: "lots" is not a number'


def test_used_resources_count_against_idle() -> None:
    pods = [
        {"name": f"ns/run-{i}", "group": "run", "req": {"cpu": "2"}, "node": "n1", "phase": "Running"} for i in range(4)
    ]
    groups = [_job("ns/run", None, phase="Running"), _job("ns/a", "4"), _job("ns/b", "1")]
    # idle = 12 − 8 used = 4: a fits exactly, b no longer does.
    assert _phases(_scenario(groups, pods)) == {"ns/run": "Running", "ns/a": "Inqueue", "ns/b": "Pending"}


def test_already_admitted_jobs_count_as_inqueue() -> None:
    groups = [_job("ns/old", "10", phase="Inqueue"), _job("ns/a", "2"), _job("ns/b", "1")]
    assert _phases(_scenario(groups)) == {"ns/old": "Inqueue", "ns/a": "Inqueue", "ns/b": "Pending"}


def test_running_gang_reserves_only_its_unallocated_minimum() -> None:
    pods = [
        {"name": f"ns/run-{i}", "group": "run", "req": {"cpu": "2"}, "node": "n1", "phase": "Running"} for i in range(2)
    ]
    groups = [_job("ns/run", "6", phase="Running", min=2)]
    ssn = _session(_scenario(groups, pods))
    plugin = next(p for _, _, p in ssn.plugins if isinstance(p, OvercommitPlugin))
    cpu = ssn.dims.index["cpu"]
    assert plugin.inqueue[cpu] == 2000  # minResources 6 − 4 allocated
    assert plugin.idle[cpu] == 8000  # 12 − 4 used


def test_degraded_gang_keeps_its_unallocated_minimum() -> None:
    # A Running gang that lost a member (1 of minMember 2 placed) keeps its admission: Volcano reserves nothing
    # for it, so new work would be admitted into the room the lost member held (self-healing gangs).
    pods = [{"name": "ns/run-0", "group": "run", "req": {"cpu": "2"}, "node": "n1", "phase": "Running"}]
    pods.append({"name": "ns/run-1", "group": "run", "req": {"cpu": "2"}})
    ssn = _session(_scenario([_job("ns/run", "6", phase="Running", min=2)], pods))
    plugin = next(p for _, _, p in ssn.plugins if isinstance(p, OvercommitPlugin))
    assert plugin.inqueue[ssn.dims.index["cpu"]] == 4000  # minResources 6 − 2 allocated


def test_gang_that_lost_every_member_reserves_nothing() -> None:
    pods = [{"name": f"ns/run-{i}", "group": "run", "req": {"cpu": "2"}} for i in range(2)]
    ssn = _session(_scenario([_job("ns/run", "6", phase="Running", min=2)], pods))
    plugin = next(p for _, _, p in ssn.plugins if isinstance(p, OvercommitPlugin))
    assert not np.any(plugin.inqueue)


def test_job_without_min_resources_is_always_admitted() -> None:
    groups = [_job("ns/big", "12"), _job("ns/free", None)]
    assert _phases(_scenario(groups)) == {"ns/big": "Inqueue", "ns/free": "Inqueue"}


def test_only_requested_dimensions_are_compared() -> None:
    # Memory is overcommitted by the first job, but the second asks only for cpu; pods are never compared.
    groups = [
        {**_job("ns/a", None), "minResources": {"memory": "12G"}},
        {**_job("ns/b", None), "minResources": {"cpu": "2", "pods": "500"}},
    ]
    assert set(_phases(_scenario(groups)).values()) == {"Inqueue"}


def test_per_resource_factor() -> None:
    groups = [_job("ns/a", "15")]
    assert _phases(_scenario(groups, **{"overcommit-factor.cpu": 1.5}))["ns/a"] == "Inqueue"
    assert _phases(_scenario(groups, **{"overcommit-factor.memory": 1.5}))["ns/a"] == "Pending"


def test_rejection_records_the_overused_event() -> None:
    scenario = _scenario([_job("ns/a", "13")])
    ssn = _session(scenario)
    assert not ssn.job_enqueueable(ssn.jobs["ns/a"])
    assert ("ns/a", "Normal", "Unschedulable", OVERUSED_MESSAGE) in ssn.records.events


def test_enqueued_flag_off_removes_the_gate() -> None:
    scenario = _scenario([_job("ns/a", "13")])
    scenario["conf"]["tiers"][0]["plugins"][0]["enableJobEnqueued"] = False
    assert _phases(scenario)["ns/a"] == "Inqueue"
