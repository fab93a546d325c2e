"""The extender against the real kube-scheduler: gangs bind whole or not at all, queues share, GPUs pack,
priorities preempt, and a killed service loses no pod (issue 4's end-to-end list)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest

from assembly.dev import DevCluster, procs
from assembly.dev.service import extender_client_ssl
from lapilli.kube.resources import EVENTS, PODGROUPS, PODS, PRIORITY_CLASSES, QUEUES
from tests.conftest import MANUAL_SCHEDULER
from tests.e2e.extender_helpers import Pool, eventually, open_pool
from tests.e2e.gangs import GangSampler
from tests.e2e.timing import timing

GPU1 = {"cpu": "1", "nvidia.com/gpu": "1"}
ACCEL = "lapilli.io/accel"


@pytest.fixture
async def pool(control_plane: DevCluster, request: pytest.FixtureRequest) -> AsyncIterator[Pool]:
    async with open_pool(control_plane, request.node.name) as p:
        yield p


async def test_gang_binds_whole_once_a_fourth_node_arrives(pool: Pool, control_plane: DevCluster):
    await pool.add_nodes(3, gpus=1)
    async with GangSampler(control_plane.client, control_plane, interval_s=0.5, namespace=pool.namespace) as sampler:
        await _gang_waits_then_binds_whole(pool, control_plane)
    assert sampler.samples and not sampler.partly_bound(), sampler.partly_bound()


async def _gang_waits_then_binds_whole(pool: Pool, control_plane: DevCluster) -> None:
    pods = await pool.gang("g4", 4, GPU1)

    async def reported() -> str:
        pg = await control_plane.client.get(PODGROUPS, "g4", pool.namespace)
        conditions = (pg.get("status") or {}).get("conditions") or []
        return next((c["message"] for c in conditions if c.get("type") == "Unschedulable"), "")

    async def whole_gang_reported() -> str:
        message = await reported()  # pods are created one by one: wait until the session saw all four
        return message if message.startswith("4/4 tasks in gang unschedulable") else ""

    assert await eventually(whole_gang_reported)
    pg = await control_plane.client.get(PODGROUPS, "g4", pool.namespace)

    async def event(reason: str, prefix: str) -> dict | None:
        return next((e for e in await _podgroup_events(control_plane, pool, "g4")
                     if e["reason"] == reason and e["message"].startswith(prefix)), None)

    # Volcano's gang event: the tasks still Pending, then why (the pacing lets a changed message out within
    # seconds; the generous timeout covers a burst spent on the pods arriving one by one).
    warning = await eventually(lambda: event("Unschedulable", "4/4 tasks in gang unschedulable: pod group is not "
                                                               "ready, "), timeout_s=45)
    assert warning["type"] == "Warning" and warning["source"]["component"] == "volcano"
    assert warning["involvedObject"]["kind"] == "PodGroup"
    assert warning["involvedObject"]["uid"] == pg["metadata"]["uid"]
    assert "4 minAvailable" in warning["message"], warning["message"]
    assert await pool.placed(pods) == {}, "no member may bind while the gang cannot fit whole"

    await pool.add_nodes(1, gpus=1)
    began = time.monotonic()
    placed = await eventually(lambda: _all_placed(pool, pods), timeout_s=60)
    timing("extender.gang_bound_after_fourth_node_s", time.monotonic() - began)
    assert sorted(placed.values()) == sorted(pool.nodes)
    scheduled = await eventually(lambda: event("Scheduled", "pod group is ready"))
    assert scheduled["type"] == "Normal" and scheduled["source"]["component"] == "volcano"


async def _podgroup_events(cluster: DevCluster, pool: Pool, name: str) -> list[dict]:
    events = (await cluster.client.list(EVENTS, pool.namespace)).items
    return [e for e in events if e["involvedObject"].get("kind") == "PodGroup" and e["involvedObject"]["name"] == name]


async def _all_placed(pool: Pool, pods: list[str]) -> dict[str, str] | None:
    placed = await pool.placed(pods)
    return placed if len(placed) == len(pods) else None


async def test_two_gangs_on_room_for_one_never_bind_in_part(pool: Pool):
    """One gang binds whole, the other not at all; when the first finishes the second runs. Never partly bound, by
    the one rule (tests/e2e/gangs.partly_bound)."""
    await pool.add_nodes(2, gpus=2, cpu="8")
    roles = [("ps", 2, {"cpu": "1"}), ("worker", 4, GPU1)]
    done = {"sim.lapilli.io/duration": "6s"}
    cluster = pool.cluster
    assert cluster.client is not None
    async with GangSampler(cluster.client, cluster, interval_s=0.2, namespace=pool.namespace) as sampler:
        gangs = {"a": await pool.gang("a", 0, {}, roles=roles, annotations=done),
                 "b": await pool.gang("b", 0, {}, roles=roles, annotations=done)}
        seen: list[tuple[int, int]] = []

        async def both_ran() -> bool:
            seen.append(await _bound_counts(pool, gangs))
            return seen[-1] == (6, 6)

        await eventually(both_ran, timeout_s=90)
    assert not sampler.partly_bound(), sampler.partly_bound()
    assert any(c in ((6, 0), (0, 6)) for c in seen), "the gangs should not have run at the same time"


async def _bound_counts(pool: Pool, gangs: dict[str, list[str]]) -> tuple[int, int]:
    """Bound members per gang from one LIST (one consistent read of the API server)."""
    client = pool.cluster.client
    assert client is not None
    listed = await client.list(PODS, pool.namespace)
    bound = {p["metadata"]["name"] for p in listed.items if (p.get("spec") or {}).get("nodeName")}
    a, b = (sum(1 for name in pods if name in bound) for pods in gangs.values())
    return a, b


async def test_gpu_binpack_packs_one_node_and_leaves_room_for_a_whole_node_pod(pool: Pool):
    await pool.add_nodes(4, gpus=8, cpu="64", memory="512Gi")
    small = await pool.gang("small", 8, GPU1)
    placed = await eventually(lambda: _all_placed(pool, small), timeout_s=60)
    assert len(set(placed.values())) == 1, placed
    big = await pool.gang("big", 1, {"cpu": "1", "nvidia.com/gpu": "8"})
    placed_big = await eventually(lambda: _all_placed(pool, big), timeout_s=60)
    assert placed_big[big[0]] not in placed.values()


async def test_priority_preemption_spares_non_preemptable_pods(pool: Pool, control_plane: DevCluster):
    client = control_plane.client
    for name, value in ((f"{pool.name}-low", 10), (f"{pool.name}-high", 1000)):
        await client.create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                               "metadata": {"name": name}, "value": value})
        pool.classes.append(name)
    await pool.add_nodes(1, gpus=2, cpu="8")
    keep = await pool.gang("keep", 1, GPU1, min_member=1, priority_class=f"{pool.name}-low",
                           annotations={"volcano.sh/preemptable": "false"})
    spare = await pool.gang("spare", 1, GPU1, min_member=1, priority_class=f"{pool.name}-low")
    await eventually(lambda: _all_placed(pool, keep + spare), timeout_s=60)
    high = await pool.gang("high", 1, GPU1, min_member=1, priority_class=f"{pool.name}-high")
    placed = await eventually(lambda: _all_placed(pool, high), timeout_s=90)
    assert placed
    assert await pool.placed(keep), "a pod marked volcano.sh/preemptable=false must never be a victim"
    assert not await pool.placed(spare), "the preemptable low-priority pod should have been evicted"


async def test_queues_share_by_weight_and_reclaim_from_the_borrower(pool: Pool, control_plane: DevCluster):
    """Queues a:b weighted 3:1 over a pool of 16 accelerators no other node has (so the pool is the whole
    market for that resource): a borrows all 16 while b is idle; when b's work arrives, reclaim evicts only a's
    pods and the split converges to 12:4 (±1)."""
    client = control_plane.client
    names = (f"{pool.name}-a", f"{pool.name}-b")
    for name, weight in zip(names, (3, 1), strict=True):
        await client.create(QUEUES, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                     "metadata": {"name": name}, "spec": {"weight": weight, "reclaimable": True}})
        pool.queues.append(name)
    await pool.add_nodes(2, gpus=0, cpu="64", memory="512Gi", extra={ACCEL: "8"})
    one = {"cpu": "1", ACCEL: "1"}
    a_pods = [p for i in range(16) for p in await pool.gang(f"a{i}", 1, one, queue=names[0])]
    assert await eventually(lambda: _count_at_least(pool, a_pods, 16), timeout_s=90) == 16
    b_pods = [p for i in range(16) for p in await pool.gang(f"b{i}", 1, one, queue=names[1])]

    async def split() -> tuple[int, int] | None:
        counts = (len(await pool.placed(a_pods)), len(await pool.placed(b_pods)))
        return counts if abs(counts[0] - 12) <= 1 and abs(counts[1] - 4) <= 1 else None

    a_now, b_now = await eventually(split, timeout_s=120)
    assert a_now + b_now <= 16


async def _count_at_least(pool: Pool, pods: list[str], n: int) -> int | None:
    count = len(await pool.placed(pods))
    return count if count >= n else None


async def test_killed_service_binds_no_gang_in_part_and_completes_after_restart(
    pool: Pool, control_plane: DevCluster
):
    """Park three of four members at bind (as kube-scheduler would), kill the service, check nothing bound,
    restart it, and let the gang complete."""
    assert control_plane.info is not None
    port = control_plane.info.ports["lapilli-extender"]
    tls = extender_client_ssl(control_plane.state_dir)  # kube-scheduler's client certificate
    await pool.add_nodes(4, gpus=1)
    # A scheduler name the service serves (tests/conftest.py) but no kube-scheduler profile does: only this test
    # calls filter and bind for these pods, as kube-scheduler would.
    pods = await pool.gang("park", 4, GPU1, scheduler=MANUAL_SCHEDULER)
    client = control_plane.client
    objs = [await client.get(PODS, pod, pool.namespace) for pod in pods]
    record = next(r for r in procs.records(control_plane.state_dir) if r.name == "lapilli")
    await _wait_ready(port, tls)
    async with aiohttp.ClientSession() as http:
        nodes = [await _planned_node(http, port, tls, pool, obj) for obj in objs[:3]]
        binds = [asyncio.create_task(_bind(http, port, tls, pool, obj, node))
                 for obj, node in zip(objs[:3], nodes, strict=True)]
        await asyncio.sleep(1.5)
        assert not any(t.done() for t in binds), "three of four members must stay parked"
        os.kill(record.pid, signal.SIGKILL)
        for task in binds:
            with contextlib.suppress(aiohttp.ClientError):
                await task
    await asyncio.sleep(1.0)
    assert await pool.placed(pods) == {}, "a killed service must leave no member of a parked gang bound"
    restarted = procs.spawn("lapilli", record.argv, control_plane.state_dir, tie_to_parent=True, order=99)
    assert restarted.pid
    await _wait_ready(port, tls)
    async with aiohttp.ClientSession() as http:
        nodes = [await _planned_node(http, port, tls, pool, obj) for obj in objs]
        answers = await asyncio.gather(*(_bind(http, port, tls, pool, obj, node)
                                         for obj, node in zip(objs, nodes, strict=True)))
    assert answers == [""] * 4
    placed = await pool.placed(pods)
    assert placed == dict(zip(pods, nodes, strict=True))
    assert sorted(nodes) == sorted(pool.nodes)


async def _planned_node(http: aiohttp.ClientSession, port: int, tls: ssl.SSLContext, pool: Pool, obj: dict) -> str:
    """Ask filter, as kube-scheduler does before it binds, until the pod's gang is planned: its node."""
    body = {"Pod": obj, "Nodes": None, "NodeNames": pool.nodes}

    async def planned() -> str | None:
        async with http.post(f"https://127.0.0.1:{port}/extender/filter", json=body, ssl=tls) as resp:
            assert resp.status == 200, await resp.text()
            names = (await resp.json())["NodeNames"] or []
        return names[0] if len(names) == 1 else None

    return str(await eventually(planned, timeout_s=60, every_s=0.5))


async def _bind(
    http: aiohttp.ClientSession, port: int, tls: ssl.SSLContext, pool: Pool, obj: dict, node: str
) -> str:
    body = {"PodName": obj["metadata"]["name"], "PodNamespace": pool.namespace,
            "PodUID": obj["metadata"]["uid"], "Node": node}
    async with http.post(f"https://127.0.0.1:{port}/extender/gang/bind", json=body, ssl=tls) as resp:
        assert resp.status == 200, await resp.text()
        return str((await resp.json())["Error"])


async def _wait_ready(port: int, tls: ssl.SSLContext) -> None:
    async def ready() -> bool:
        try:
            async with aiohttp.ClientSession() as http, http.get(f"https://127.0.0.1:{port}/readyz", ssl=tls) as resp:
                return resp.status == 200
        except aiohttp.ClientError:
            return False

    await eventually(ready, timeout_s=60, every_s=0.5)


async def test_extender_port_answers_only_kube_schedulers_client_certificate(control_plane: DevCluster):
    """The dev cluster wires the extender as an install should: TLS, client certificates verified (every other
    test here reaches it through the real kube-scheduler's tlsConfig)."""
    assert control_plane.info is not None
    url = f"https://127.0.0.1:{control_plane.info.ports['lapilli-extender']}/readyz"
    kube_scheduler = extender_client_ssl(control_plane.state_dir)
    anonymous = ssl.create_default_context(cafile=control_plane.state_dir / "extender-tls" / "ca.crt")
    async with aiohttp.ClientSession() as http:
        async with http.get(url, ssl=kube_scheduler) as resp:
            assert resp.status == 200
        with pytest.raises(aiohttp.ClientError):
            async with http.get(url, ssl=anonymous) as resp:
                await resp.read()
        with pytest.raises(aiohttp.ClientError):
            async with http.get(url.replace("https", "http")) as resp:
                await resp.read()
