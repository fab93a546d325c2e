"""The extender's borrowed leadership (lapilli.cluster.follower): it leads while this host's kube-scheduler holds
and renews its Lease, stops before any other kube-scheduler may take it, and never writes the Lease."""

from __future__ import annotations

import aiohttp
import pytest

from lapilli.cluster.follower import LeaseFollower
from lapilli.kube import Fenced, KubeClient, KubeConfig
from lapilli.kube.resources import LEASES
from tests.unit.lapilli.cluster.test_leader import NS, Clock, Leases, Store

NAME = "lapilli-scheduler"


def lease(holder: str, renew: int) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": NAME, "namespace": NS},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": f"2026-01-01T00:00:{renew:02d}Z"}}


def follower(store: Store, host: str, clock: Clock) -> tuple[LeaseFollower, Leases]:
    leases = Leases(store)
    return LeaseFollower(leases, NS, NAME, hostname=host, clock=clock), leases  # type: ignore[arg-type]


async def test_leads_once_its_own_kube_scheduler_is_seen_renewing():
    store, clock = Store(), Clock()
    a, _ = follower(store, "sched-a", clock)
    b, _ = follower(store, "sched-b", clock)
    store.write(lease("sched-a_1b4e28ba-2fa1-11d2-883f-0016d3cca427", 0))
    assert not await a.attempt(), "a record seen for the first time may be a dead kube-scheduler's"
    assert not await b.attempt()
    clock.now = 2
    store.write(lease("sched-a_1b4e28ba-2fa1-11d2-883f-0016d3cca427", 2))
    assert await a.attempt()
    assert not await b.attempt(), "another pod's kube-scheduler holds it"
    assert store.spec()["holderIdentity"].startswith("sched-a_"), "the follower never writes the Lease"


async def test_a_host_name_that_is_a_prefix_of_another_is_not_mistaken_for_it():
    store, clock = Store(), Clock()
    a, _ = follower(store, "sched", clock)
    for t in (0, 2):
        clock.now = t
        store.write(lease(f"sched-b_uuid{t}", t))
        assert not await a.attempt()


async def test_stops_at_the_renew_deadline_when_its_kube_scheduler_stops_renewing():
    store, clock = Store(), Clock()
    a, _ = follower(store, "sched-a", clock)
    for t in (0, 2):
        clock.now = t
        store.write(lease("sched-a_x", t))
        await a.attempt()
    assert a.is_leader()
    clock.now = 11.9
    assert await a.attempt() is True  # no renewal seen since t=2, still inside the deadline
    clock.now = 12
    assert not a.is_leader(), "ten seconds after the last renewal seen: before the 15 s Lease can change hands"


async def test_unreachable_api_server_keeps_leadership_only_until_the_deadline():
    store, clock = Store(), Clock()
    a, leases = follower(store, "sched-a", clock)
    for t in (0, 2):
        clock.now = t
        store.write(lease("sched-a_x", t))
        await a.attempt()
    leases.fail = aiohttp.ClientConnectionError("connection refused")
    clock.now = 8
    assert await a.attempt()
    clock.now = 12
    assert not await a.attempt()


async def test_leadership_moves_with_the_lease_and_writes_are_fenced():
    store, clock = Store(), Clock()
    a, _ = follower(store, "sched-a", clock)
    b, _ = follower(store, "sched-b", clock)
    for t in (0, 2):
        clock.now = t
        store.write(lease("sched-a_x", t))
        await a.attempt()
        await b.attempt()
    assert a.is_leader() and not b.is_leader()
    clock.now = 20
    store.write(lease("sched-b_y", 20))  # sched-a's kube-scheduler died, sched-b's took the expired Lease
    assert not await a.attempt()
    assert await b.attempt(), "a change seen under its own host's holder: its kube-scheduler just acquired"
    async with KubeClient(KubeConfig(server="http://127.0.0.1:1"), request_timeout_s=5) as client:
        with pytest.raises(Fenced):
            await a.fence(client, "the extender's").create(LEASES, lease("x", 0), NS)


async def test_a_missing_lease_grants_nothing():
    store, clock = Store(), Clock()
    a, _ = follower(store, "sched-a", clock)
    assert not await a.attempt()
    await a.release()
    assert store.obj is None
