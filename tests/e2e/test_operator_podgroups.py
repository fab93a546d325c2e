"""Other operators' PodGroup path on the real control plane: the exact PodGroups and pods that Kubeflow's training
operator (PyTorchJob, volcano gang scheduler), Spark's VolcanoFeatureStep and KubeRay's volcano batch scheduler
create (tests/e2e/operator_objects.py), never a Volcano Job. For each: the gang semantics the operator relies on
and the queue's `status.allocated` that Volcano's scheduler keeps."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from assembly.dev import DevCluster
from lapilli.kube import KubeClient, NotFound
from lapilli.kube.resources import PODGROUPS, PODS, QUEUES
from lapilli.resources import parse_quantity
from tests.e2e.gangs import never_partly_bound
from tests.e2e.operator_objects import pytorchjob, raycluster, spark_app, total
from tests.e2e.test_controller_helpers import eventually, remove_example_jobs

NS = "operators"


@pytest.fixture(scope="module")
async def api(control_plane: DevCluster) -> KubeClient:
    assert control_plane.info is not None and control_plane.info.extender, "needs the service with its extender"
    assert control_plane.client is not None
    await control_plane.ensure_namespace(NS)
    await remove_example_jobs(control_plane.client)
    return control_plane.client


async def make_queue(api: KubeClient, name: str, capability: dict[str, str]) -> None:
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
             "spec": {"weight": 1, "reclaimable": True, "capability": capability}}
    await api.create(QUEUES, queue)

    async def open_() -> bool:
        return ((await api.get(QUEUES, name)).get("status") or {}).get("state") == "Open"

    await eventually(open_, 30, f"queue {name} Open")


async def pg_phase(api: KubeClient, name: str) -> str:
    return str(((await api.get(PODGROUPS, name, NS)).get("status") or {}).get("phase") or "")


async def wait_pg(api: KubeClient, name: str, *phases: str, timeout_s: float = 30) -> None:
    seen: dict = {}

    async def check() -> bool:
        seen["status"] = (await api.get(PODGROUPS, name, NS)).get("status") or {}
        return str(seen["status"].get("phase") or "") in phases

    try:
        await eventually(check, timeout_s, f"PodGroup {name} in {phases}")
    except AssertionError as exc:  # the whole status says which session's word is missing
        raise AssertionError(f"{exc}; its status: {seen.get('status')!r}") from None


# Not admitted. A PodGroup created with a status (KubeRay writes Pending) reads "" until the scheduler writes
# one: Lapilli's PodGroup CRD has a status subresource, Volcano's has none.
NOT_ADMITTED = ("", "Pending")


async def stays_unadmitted(api: KubeClient, name: str, seconds: float = 6) -> None:
    """The PodGroup stays out of Inqueue over several scheduling sessions."""
    for _ in range(int(seconds / 0.5)):
        assert await pg_phase(api, name) in NOT_ADMITTED
        await asyncio.sleep(0.5)


async def running(api: KubeClient, pods: list[dict], timeout_s: float = 60) -> list[dict]:
    names = {p["metadata"]["name"] for p in pods}

    async def check() -> list[dict] | None:
        live = [p for p in (await api.list(PODS, NS)).items if p["metadata"]["name"] in names]
        ok = len(live) == len(names) and all((p.get("status") or {}).get("phase") == "Running" for p in live)
        return live if ok else None

    return await eventually(check, timeout_s, f"{sorted(names)} Running")


async def allocated_is(api: KubeClient, queue: str, expected: dict[str, float], timeout_s: float = 30) -> None:
    """The queue's `status.allocated` (written by the scheduler) counts exactly these resources."""

    seen: list[dict] = []

    async def check() -> bool:
        allocated = ((await api.get(QUEUES, queue)).get("status") or {}).get("allocated") or {}
        seen[:] = [allocated]
        return {r: float(parse_quantity(allocated[r])) if r in allocated else 0.0 for r in expected} == expected

    try:
        await eventually(check, timeout_s, f"queue {queue} allocated {expected}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the queue's allocated: {seen}") from None


async def remove(api: KubeClient, pods: list[dict], podgroups: list[str], queue: str | None = None) -> None:
    for p in pods:
        with contextlib.suppress(NotFound):
            await api.delete(PODS, p["metadata"]["name"], NS)
    for name in podgroups:
        with contextlib.suppress(NotFound):
            await api.delete(PODGROUPS, name, NS)
    names = {p["metadata"]["name"] for p in pods}

    async def gone() -> bool:
        return not names & {p["metadata"]["name"] for p in (await api.list(PODS, NS)).items}

    await eventually(gone, 60, "the operator's pods deleted")
    if queue:
        with contextlib.suppress(NotFound):
            await api.delete(QUEUES, queue)


async def test_kubeflow_pytorchjob_gang(api, control_plane):
    await make_queue(api, "kubeflow-training", {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "16"})
    pg, pods = pytorchjob("mnist-ddp", NS, "kubeflow-training", workers=2, gpus=4)
    pg2, pods2 = pytorchjob("mnist-ddp-2", NS, "kubeflow-training", workers=2, gpus=4)
    try:
        await api.create(PODGROUPS, pg, NS)
        # the operator creates pods only once the PodGroup left Pending (DelayPodCreationDueToPodGroup)
        await wait_pg(api, "mnist-ddp", "Inqueue")
        async with never_partly_bound(control_plane, NS):  # the gang of master + 2 workers binds together
            for p in pods:
                await api.create(PODS, p, NS)
            await running(api, pods)
        await wait_pg(api, "mnist-ddp", "Running")
        await allocated_is(api, "kubeflow-training", total(pods))  # 12 cpu, 48Gi, 12 GPUs
        # a second job of 12 GPUs exceeds the queue's 16: its PodGroup is not admitted, so no pods are made
        await api.create(PODGROUPS, pg2, NS)
        await stays_unadmitted(api, "mnist-ddp-2")
        # the first job ends: the second is admitted and runs whole
        await remove(api, pods, ["mnist-ddp"])
        await wait_pg(api, "mnist-ddp-2", "Inqueue", timeout_s=60)
        async with never_partly_bound(control_plane, NS):
            for p in pods2:
                await api.create(PODS, p, NS)
            await running(api, pods2)
        await allocated_is(api, "kubeflow-training", total(pods2))
    finally:
        await remove(api, pods + pods2, ["mnist-ddp", "mnist-ddp-2"], "kubeflow-training")


async def _spark_driver(api: KubeClient, pg: dict, driver: dict) -> dict:
    """What Spark's VolcanoFeatureStep does first: the PodGroup (a pre-resource), the driver, then the driver
    owns the PodGroup. The owner reference executors later carry is returned."""
    await api.create(PODGROUPS, pg, NS)
    created = await api.create(PODS, driver, NS)
    ref = {"apiVersion": "v1", "kind": "Pod", "name": driver["metadata"]["name"],
           "uid": created["metadata"]["uid"], "controller": True}
    await api.patch(PODGROUPS, pg["metadata"]["name"], {"metadata": {"ownerReferences": [ref]}}, NS)
    return ref


async def test_spark_driver_first_then_executors(api):
    await make_queue(api, "spark", {"cpu": "8", "memory": "32Gi"})
    pg, driver, execs = spark_app(NS, "spark", executors=2)
    # A second app asking for 5 executors: its PodGroup's minResources (6 cpu) exceed what the queue has left
    # while the first runs (8 - 3), though its driver alone (1 cpu) would fit.
    pg2, driver2, _ = spark_app(NS, "spark", executors=5)
    pg_name, pg2_name = pg["metadata"]["name"], pg2["metadata"]["name"]
    try:
        ref = await _spark_driver(api, pg, driver)
        # minMember 1: the driver runs alone; its PodGroup was admitted on minResources (driver + executors)
        await running(api, [driver])
        await wait_pg(api, pg_name, "Running")
        await allocated_is(api, "spark", total([driver]))
        # the driver asks for executors later; they join the same PodGroup and run
        for e in execs:
            e["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
            await api.create(PODS, e, NS)
        await running(api, execs)
        await allocated_is(api, "spark", total([driver, *execs]))  # 3 cpu, 4224Mi
        status = (await api.get(PODGROUPS, pg_name, NS))["status"]
        assert (status["phase"], status.get("running")) == ("Running", 3)

        await _spark_driver(api, pg2, driver2)
        await stays_unadmitted(api, pg2_name)  # held back by minResources, not by the driver's request
        assert not (await api.get(PODS, driver2["metadata"]["name"], NS))["spec"].get("nodeName")
        # the first app ends: the second is admitted and its driver runs
        await remove(api, [driver, *execs], [pg_name])
        await wait_pg(api, pg2_name, "Inqueue", "Running", timeout_s=60)
        await running(api, [driver2])
        await allocated_is(api, "spark", total([driver2]))
    finally:
        await remove(api, [driver, *execs, driver2], [pg_name, pg2_name], "spark")


async def test_kuberay_cluster_gang_and_queue(api, control_plane):
    await make_queue(api, "ray", {"cpu": "96", "memory": "512Gi", "nvidia.com/gpu": "16"})
    pg, pods = raycluster("llm", NS, "ray", workers=2, gpus=8)
    pg2, pods2 = raycluster("llm-small", NS, "ray", workers=1, gpus=8)
    try:
        # KubeRay makes the PodGroup and every pod at once, without waiting for admission
        async with never_partly_bound(control_plane, NS):
            await api.create(PODGROUPS, pg, NS)
            for p in pods:
                await api.create(PODS, p, NS)
            live = await running(api, pods)
        assert len({p["spec"]["nodeName"] for p in live if "worker" in p["metadata"]["name"]}) == 2
        await wait_pg(api, "ray-llm-pg", "Running")
        await allocated_is(api, "ray", total(pods))  # 40 cpu, 160Gi, 16 GPUs
        # a second cluster needs 8 more GPUs than the queue's 16: nothing of it binds, not even its head
        await api.create(PODGROUPS, pg2, NS)
        for p in pods2:
            await api.create(PODS, p, NS)
        await stays_unadmitted(api, "ray-llm-small-pg")
        for p in pods2:
            assert not (await api.get(PODS, p["metadata"]["name"], NS))["spec"].get("nodeName")
        await allocated_is(api, "ray", total(pods))
        # the first cluster goes away: the second binds whole
        await remove(api, pods, ["ray-llm-pg"])  # outside the sampling: a gang being deleted is partly there
        async with never_partly_bound(control_plane, NS):
            await running(api, pods2, timeout_s=90)
        await allocated_is(api, "ray", total(pods2))
    finally:
        await remove(api, pods + pods2, ["ray-llm-pg", "ray-llm-small-pg"], "ray")
