"""Usage-decayed fair share and the start-time estimate on the real control plane (issue 21).

The service runs a conf with the `fairshare` plugin (half-life 1h, sampled every second). lab-a runs a job for a
few seconds: the leader persists lab-a's decayed usage on the Queue, lab-b has none. Then one job of each lab waits
for the same room (room for one): lab-b's goes first, and `lapilli job why` for lab-a's names the usage. The two
waiting jobs use a scheduler name no kube-scheduler profile serves, so the service plans them session after session
but nothing binds them: the competition stays visible to `job why` for as long as the test looks.

The estimate: lab-a's job also waits for the `ops` blocker's room, which says it runs 20 minutes
(volcano.sh/expected-duration): "expected to start in about 20 min (when ops/blocker ends, …)". A job that needs the
whole node waits for lab-b's and lab-a's jobs too, whose ends nothing tells: "expected start: unknown (…)".

This module starts its own control plane (1 node × 4 GPUs) because the conf is its own."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries
from lapilli.kube import KubeClient
from lapilli.kube.resources import QUEUES
from lapilli.usage import USAGE_ANNOTATION, parse_record
from tests.conftest import MANUAL_SCHEDULER
from tests.e2e.test_controller_helpers import apply, eventually, get_job, lapilli, phase

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins:
  - {name: fairshare, arguments: {halfLife: 1h, samplingInterval: 1s, resourceWeights: {nvidia.com/gpu: 1}}}
  - {name: predicates}
  - {name: capacity}
  - {name: nodeorder}
"""
GPU = "nvidia.com/gpu"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    state = tmp_path_factory.mktemp("fair-share")
    conf = state / "fairshare.conf"
    conf.write_text(CONF)
    spec = ClusterSpec(
        state_dir=state, nodes=1, shape=NodeShape(cpu="16", memory="64Gi", gpus=4), kubelet="inprocess",
        tie_to_parent=True, heartbeat_s=10.0, extender=True,
        serve_args=("--scheduler-conf", str(conf), "--scheduler-name", "volcano",
                    "--scheduler-name", MANUAL_SCHEDULER),
    )
    dev = DevCluster(spec, find_binaries())
    await dev.up()
    try:
        for namespace in ("lab-a", "lab-b", "ops"):
            await dev.ensure_namespace(namespace)
            assert dev.client is not None
            await dev.client.create(QUEUES, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                             "metadata": {"name": namespace}, "spec": {"weight": 1}})
        for namespace in ("lab-a", "lab-b", "ops"):
            await eventually(lambda q=namespace: _queue_open(dev, q), 30, f"queue {namespace} is Open")
        yield dev
    finally:
        await dev.down()


def job(namespace: str, name: str, gpus: int, *, scheduler: str = "volcano", runs_for: str = "",
        expected: str = "") -> dict[str, Any]:
    """A Volcano Job of `gpus` one-GPU pods in the queue named like its namespace."""
    pod_meta = {"annotations": {"sim.lapilli.io/duration": runs_for}} if runs_for else {}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if expected:
        meta["annotations"] = {"volcano.sh/expected-duration": expected}
    template = {"metadata": pod_meta, "spec": {"restartPolicy": "Never", "containers": [{
        "name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}}]}}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta,
            "spec": {"schedulerName": scheduler, "queue": namespace, "minAvailable": gpus,
                     "tasks": [{"name": "worker", "replicas": gpus, "template": template}]}}


async def gpu_seconds(client: KubeClient, queue: str) -> float:
    annotations = (await client.get(QUEUES, queue))["metadata"].get("annotations") or {}
    if USAGE_ANNOTATION not in annotations:
        return 0.0
    return parse_record(annotations[USAGE_ANNOTATION]).usage.get(GPU, 0.0) / 1000


def why(dev: DevCluster, conf: Path, namespace: str, name: str, *extra: str) -> str:
    result = lapilli(dev, "job", "why", "-n", namespace, name, "--conf", str(conf), *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_recent_usage_orders_the_queues_and_job_why_says_so_with_an_estimate(cluster: DevCluster,
                                                                                   tmp_path: Path) -> None:
    client = cluster.client
    assert client is not None
    conf = tmp_path / "fairshare.conf"
    conf.write_text(CONF)

    apply(cluster, job("lab-a", "warmup", 2, runs_for="6s"), tmp_path)
    await eventually(lambda: _phase_is(client, "lab-a", "warmup", "Completed"), 90, "lab-a's warm-up job ran")
    used = await eventually(lambda: gpu_seconds(client, "lab-a"), 20, "the leader persisted lab-a's usage")
    assert used > 2  # two GPUs for a few seconds, as sampled every second
    assert await gpu_seconds(client, "lab-b") == 0  # lab-b ran nothing: no record at all

    applied = time.time()  # the blocker cannot have run longer than since now
    apply(cluster, job("ops", "blocker", 2, expected="20m"), tmp_path)
    await eventually(lambda: _phase_is(client, "ops", "blocker", "Running"), 60, "the blocker runs on 2 of 4 GPUs")
    # lab-a's job is submitted first: without fairshare it would go first (same share, older queue name).
    apply(cluster, job("lab-a", "next", 2, scheduler=MANUAL_SCHEDULER), tmp_path)
    apply(cluster, job("lab-b", "next", 2, scheduler=MANUAL_SCHEDULER), tmp_path)
    apply(cluster, job("ops", "whole", 4, scheduler=MANUAL_SCHEDULER), tmp_path)

    async def behind() -> str | None:
        text = why(cluster, conf, "lab-a", "next")
        return text if "lab-b goes first" in text else None

    text = await eventually(behind, 60, "job why names lab-b ahead of lab-a by usage")
    assert "lab-a used" in text and "(decayed, half-life 1h) against lab-b's 0: lab-b goes first" in text, text
    assert "expected to start in about 20 min (when ops/blocker ends, by its volcano.sh/expected-duration)" in text
    assert "lab-b goes first" not in why(cluster, conf, "lab-b", "next")

    answer = json.loads(why(cluster, conf, "lab-a", "next", "-o", "json"))
    ran_at_most = time.time() - applied
    order = next(r for r in answer["reasons"] if r["kind"] == "Order")
    assert order["data"]["usage"]["usedHours"]["lab-b"] == 0
    # What is left of the blocker's 20 minutes: its Running condition is stamped to the second (and rounded here).
    assert answer["estimate"]["after"] == "ops/blocker"
    assert 1200 - ran_at_most - 2 <= answer["estimate"]["seconds"] <= 1200, (answer["estimate"], ran_at_most)

    whole = json.loads(why(cluster, conf, "ops", "whole", "-o", "json"))["estimate"]
    # It needs the whole node: the blocker's end is known, lab-b's job (running in the replay from now) and lab-a's
    # (from the blocker's end) have none.
    assert whole["seconds"] is None and whole["unknownEnds"] == ["lab-a/next", "lab-b/next"], whole
    assert whole["text"].startswith("expected start: unknown (when lab-a/next, lab-b/next will end is not known")

    listing = lapilli(cluster, "queue", "list")
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line for line in listing.stdout.splitlines()[1:]}
    assert rows["lab-a"].endswith("GPU·s") and rows["lab-b"].rstrip().endswith("-"), listing.stdout


async def _queue_open(dev: DevCluster, name: str) -> bool:
    assert dev.client is not None
    return ((await dev.client.get(QUEUES, name)).get("status") or {}).get("state") == "Open"


async def _phase_is(client: KubeClient, namespace: str, name: str, wanted: str) -> bool:
    return phase(await get_job(client, namespace, name)) == wanted
