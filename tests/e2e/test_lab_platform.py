"""The lab GPU platform (examples/lab-platform/) on the real control plane, with the service running the
platform's own scheduler conf (capacity with a queue tree): lab-b borrows all 8 GPUs while lab-a is idle, lab-a's
users submit, reclaim gives lab-a its share back, and no gang is ever bound in part — the reclaimed lab-b jobs
restart whole (their PodEvicted → RestartJob policy) and wait with no pod bound.

This module starts its own control plane (4 nodes × 2 GPUs) because the conf is the platform's, not the shipped
one the other e2e tests share."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from assembly.dev import ClusterSpec, DevCluster, NodeShape, find_binaries
from lapilli.kube import KubeClient
from lapilli.kube.resources import PODS
from tests.e2e.gangs import never_partly_bound
from tests.e2e.test_controller_helpers import apply, eventually, get_job, job_pods, phase
from tests.e2e.timing import timing

LAB = Path(__file__).resolve().parents[2] / "examples" / "lab-platform"
USERS = {"lab-a": ("alice", "bob"), "lab-b": ("carol", "dave")}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def lab(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    spec = ClusterSpec(
        state_dir=tmp_path_factory.mktemp("lab-platform"), nodes=4,
        shape=NodeShape(cpu="16", memory="64Gi", gpus=2), kubelet="inprocess", tie_to_parent=True,
        heartbeat_s=10.0, extender=True, serve_args=("--scheduler-conf", str(LAB / "scheduler-conf.yaml")),
    )
    cluster = DevCluster(spec, find_binaries())
    await cluster.up()
    try:
        for namespace in USERS:
            await cluster.ensure_namespace(namespace)
        cluster.kubectl("apply", "-f", str(LAB / "queues.yaml"))  # unchanged
        yield cluster
    finally:
        await cluster.down()


def _user_job(user: str, lab: str, index: int) -> dict[str, Any]:
    """The platform's example Job, as `user` submits it to their own queue."""
    job = copy.deepcopy(yaml.safe_load((LAB / "job-alice-ddp.yaml").read_text()))
    job["metadata"].update(name=f"{user}-ddp-{index}", namespace=lab)
    job["spec"]["queue"] = f"{lab}-{user}"
    return job


async def _bound(client: KubeClient, namespace: str, name: str) -> int:
    """Members of the job bound to a node and not being deleted."""
    pods = await job_pods(client, namespace, name)
    return sum(1 for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp"))


async def _running_jobs(client: KubeClient, namespace: str, names: list[str]) -> list[str]:
    return [n for n in names if phase(await get_job(client, namespace, n)) == "Running"]


async def test_a_lab_borrows_idle_gpus_and_gives_them_back_by_reclaim_gangs_whole(lab: DevCluster, tmp_path):
    client = lab.client
    assert client is not None
    borrowers = [f"{u}-ddp-{i}" for u in USERS["lab-b"] for i in (1, 2)]
    for user in USERS["lab-b"]:
        for i in (1, 2):
            apply(lab, _user_job(user, "lab-b", i), tmp_path)

    async def all_borrowing() -> list[str] | None:
        running = await _running_jobs(client, "lab-b", borrowers)
        return running if len(running) == 4 else None

    await eventually(all_borrowing, timeout_s=120, what="lab-b runs 4 jobs on all 8 GPUs while lab-a is idle")
    assert [await _bound(client, "lab-b", n) for n in borrowers] == [2, 2, 2, 2]

    owners = ["alice-ddp", "bob-ddp-1"]

    async def owners_back() -> bool:
        return len(await _running_jobs(client, "lab-a", owners)) == 2

    async with never_partly_bound(lab, "lab-a"):  # lab-a's gangs bind whole, by the one rule
        apply(lab, LAB / "job-alice-ddp.yaml", tmp_path)  # alice's example, unchanged
        await eventually(lambda: get_job(client, "lab-a", "alice-ddp"), timeout_s=30, what="alice's job created")
        apply(lab, _user_job("bob", "lab-a", 1), tmp_path)
        began = time.monotonic()
        await eventually(owners_back, timeout_s=180, what="lab-a's two jobs run on GPUs reclaimed from lab-b")
        timing("lab.owners_running_after_reclaim_s", time.monotonic() - began)

    async def settled() -> list[int] | None:
        counts = [await _bound(client, "lab-b", n) for n in borrowers]
        return counts if sorted(counts) == [0, 0, 2, 2] else None

    counts = await eventually(settled, timeout_s=120, what="lab-b keeps 2 whole jobs, 2 wait with nothing bound")
    assert sum(counts) == 4  # lab-b is back at its deserved 4 GPUs
    pods = (await client.list(PODS, "lab-a")).items
    assert sum(1 for p in pods if p["spec"].get("nodeName")) == 4  # lab-a holds its deserved 4
