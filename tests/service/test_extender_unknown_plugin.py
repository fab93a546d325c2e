"""A scheduler conf naming a plugin Lapilli does not implement (the seeds' optional `numa-aware`): the service
loads it with one warning that names the plugin, and schedules with the rest of the conf, as Volcano does."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from extender.service.loop import ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.plan import Plan
from tests.service.extender_state import RecordingClient, cluster_state
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

pytestmark = pytest.mark.asyncio(loop_scope="session")

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: numa-aware
    arguments: {weight: 10}
  - name: nodeorder
"""


async def test_numa_aware_is_left_out_with_one_warning_and_gangs_still_bind(tmp_path: Path, caplog):
    path = tmp_path / "scheduler.conf"
    path.write_text(CONF)
    with caplog.at_level(logging.WARNING):
        source = ConfSource(path)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "'numa-aware'" in warnings[0], warnings
    assert "numa-aware" not in source.conf.plugin_names()
    assert {"gang", "proportion", "nodeorder"} <= set(source.conf.plugin_names())

    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi"}}) for i in range(2)]
    docs += [queue({"name": "default"}), podgroup({"name": "ml/g", "min": 2, "phase": "Inqueue"})]
    docs += [pod({"name": f"ml/g-w-{i}", "group": "g", "req": {"cpu": "6"}}) for i in range(2)]
    state = cluster_state(docs)
    plan = Plan(ttl_s=60)
    metrics = ExtenderMetrics(CollectorRegistry(), parked=lambda: 0, restarts=state.restarts)
    loop = SessionLoop(state, plan, RecordingClient(), source, metrics)  # type: ignore[arg-type]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await loop.run_once()
        await loop.run_once()
    assert sorted(plan.placements().values()) == ["n0", "n1"]  # the gang is planned whole, one pod a node
    assert not [r for r in caplog.records if "numa-aware" in r.getMessage()], "warned once, at load, not per session"
