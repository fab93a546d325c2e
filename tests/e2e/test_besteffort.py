"""BestEffort gangs on the real control plane (issue 13): a Volcano Job whose tasks request nothing binds and runs
while another queue has running pods — before the fix its PodGroup went Inqueue, its pods were created, and then
they waited for ever with `gang ns/pg: 0/N pods placeable` (reclaim pipelined them, backfill never took them
back). A resourced gang beside it still binds whole or not at all."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from assembly.dev import DevCluster
from lapilli.kube import NotFound
from lapilli.kube.resources import PODGROUPS, QUEUES, VC_JOBS
from tests.e2e.extender_helpers import Pool, eventually, open_pool
from tests.e2e.test_controller_helpers import job_pods, podgroup_of, remove_job, wait_phase


@pytest.fixture
async def pool(control_plane: DevCluster, request: pytest.FixtureRequest) -> AsyncIterator[Pool]:
    async with open_pool(control_plane, request.node.name) as p:
        yield p


def _best_effort_job(pool: Pool, name: str, queue: str) -> dict[str, Any]:
    """An MPI-style Volcano Job as Volcano's integration examples write it: no resources anywhere."""
    def task(role: str, replicas: int) -> dict[str, Any]:
        spec = pool.pod_spec({})
        spec["containers"][0].pop("resources")
        spec.pop("schedulerName")  # the webhook's default (volcano) fills it
        return {"name": role, "replicas": replicas,
                "template": {"spec": {**spec, "restartPolicy": "OnFailure"}}}

    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": pool.namespace},
            "spec": {"minAvailable": 3, "queue": queue, "tasks": [task("master", 1), task("worker", 2)]}}


async def test_best_effort_jobs_run_while_another_queue_has_running_pods(pool: Pool, control_plane: DevCluster):
    client = control_plane.client
    assert client is not None
    other = f"{pool.name}-q2"
    await client.create(QUEUES, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                 "metadata": {"name": other}, "spec": {"weight": 1, "reclaimable": True}})
    pool.queues.append(other)
    await pool.add_nodes(2, gpus=0, cpu="4", memory="8Gi")
    # The other queue runs a job above its minMember: its pods are reclaimees on the pool's nodes.
    running = await pool.gang("run", 2, {"cpu": "1"}, min_member=1, queue=other)
    assert len(await eventually(lambda: _all_placed(pool, running), timeout_s=60)) == 2

    jobs = [("be-default", "default"), ("be-other", other)]
    try:
        for name, queue in jobs:
            await client.create(VC_JOBS, _best_effort_job(pool, name, queue), pool.namespace)
        for name, _ in jobs:
            job = await wait_phase(client, pool.namespace, name, "Running", timeout_s=90)
            pods = await job_pods(client, pool.namespace, name)
            assert len(pods) == 3 and all(p["spec"].get("nodeName") in pool.nodes for p in pods), name

            async def podgroup_running(job: dict[str, Any] = job) -> bool:  # the next session writes it
                return ((await podgroup_of(client, job)).get("status") or {}).get("phase") == "Running"

            assert await eventually(podgroup_running, timeout_s=30)
        # A resourced gang that cannot fit whole beside them still binds nothing.
        too_big = await pool.gang("big", 3, {"cpu": "3"})
        await eventually(lambda: _reported(pool, "big"), timeout_s=30)
        assert await pool.placed(too_big) == {}
    finally:
        for name, _ in jobs:
            with contextlib.suppress(NotFound):
                await remove_job(client, pool.namespace, name)


async def _all_placed(pool: Pool, pods: list[str]) -> dict[str, str] | None:
    placed = await pool.placed(pods)
    return placed if len(placed) == len(pods) else None


async def _reported(pool: Pool, podgroup: str) -> bool:
    client = pool.cluster.client
    assert client is not None
    pg = await client.get(PODGROUPS, podgroup, pool.namespace)
    return any(c.get("type") == "Unschedulable" for c in (pg.get("status") or {}).get("conditions") or [])
