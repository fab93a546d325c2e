"""Scenario tables (tests/unit/extender/engine/scenarios/*.yaml): objects in, expected binds/evictions/pipelined/phases out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lapilli.devices.assign import encode_pod_devices
from tests.unit.extender.engine.builders import run

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.yaml"))


def _cases() -> list[Any]:
    cases = []
    for path in SCENARIOS:
        for scenario in yaml.safe_load(path.read_text()):
            cases.append(pytest.param(scenario, id=f"{path.stem}: {scenario['name']}"))
    return cases


@pytest.mark.parametrize("scenario", _cases())
def test_scenario(scenario: dict[str, Any]) -> None:
    result = run(scenario)
    expect = scenario["expect"]
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
    for key, code in (expect.get("codes") or {}).items():  # kube-scheduler's Status code of the gang's outcome
        assert result.podgroups[key].status.code.value == code, (key, result.podgroups[key].status)
    for key, counts in (expect.get("counts") or {}).items():  # the typed result's ready/pending/task counts
        pg = result.podgroups[key]
        assert {k: getattr(pg, k) for k in counts} == counts, key
    if "devices" in expect:  # each placed pod's cards, as volcano.sh/vgpu-ids-new writes them
        assert {k: encode_pod_devices(v) for k, v in result.devices.items()} == (expect["devices"] or {})
    for name, deserved in (expect.get("deserved") or {}).items():
        assert result.to_json()["queues"][name]["deserved"] == deserved, name
