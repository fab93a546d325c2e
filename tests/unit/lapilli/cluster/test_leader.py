"""Lease leader election (lapilli.cluster.leader): who leads, when a standby may take over, that a holder
stops before anyone else can start, release on shutdown, the work run while leading, the write fence and
the gauge. The Lease API is an in-memory store that checks resourceVersions as the API server does."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from lapilli.cluster.leader import LeaderGauge, LeaseElector
from lapilli.kube import AlreadyExists, ApiError, Conflict, Fenced, KubeClient, KubeConfig, NotFound
from lapilli.kube.resources import LEASES

NS, NAME = "lapilli-system", "lapilli-controllers"


class Store:
    """One Lease as the API server keeps it."""

    def __init__(self) -> None:
        self.obj: dict | None = None
        self.version = 0

    def spec(self) -> dict:
        assert self.obj is not None
        return self.obj["spec"]

    def write(self, obj: dict) -> dict:
        self.version += 1
        self.obj = copy.deepcopy(obj)
        self.obj["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.obj)


class Leases:
    """One replica's view of the Lease API; `fail` cuts it off from the server."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.fail: Exception | None = None
        self.conflict_next = False

    def _check(self) -> None:
        if self.fail is not None:
            raise self.fail
        if self.conflict_next:
            self.conflict_next = False
            raise Conflict(409, "Conflict", "the object has been modified")

    async def get(self, res, name, namespace=None):
        if self.fail is not None:
            raise self.fail
        if self.store.obj is None:
            raise NotFound(404, "NotFound", f"leases {name!r} not found")
        return copy.deepcopy(self.store.obj)

    async def create(self, res, obj, namespace=None):
        self._check()
        if self.store.obj is not None:
            raise AlreadyExists(409, "AlreadyExists", "leases already exists")
        return self.store.write(obj)

    async def replace(self, res, obj, namespace=None):
        self._check()
        assert self.store.obj is not None
        if obj["metadata"].get("resourceVersion") != self.store.obj["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        return self.store.write(obj)


class Clock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def elector(store: Store, identity: str, clock: Clock, **timing) -> tuple[LeaseElector, Leases]:
    leases = Leases(store)
    timing = {"duration_s": 15, "renew_deadline_s": 10.0, "retry_s": 2.0, **timing}
    return LeaseElector(leases, NS, NAME, identity=identity, clock=clock, **timing), leases  # type: ignore[arg-type]


async def test_the_first_candidate_creates_the_lease_and_the_second_stands_by():
    store, clock = Store(), Clock()
    a, _ = elector(store, "a", clock)
    b, _ = elector(store, "b", clock)
    assert await a.attempt() is True
    assert await b.attempt() is False
    assert a.is_leader() and not b.is_leader()
    assert store.spec()["holderIdentity"] == "a"
    assert store.spec()["leaseDurationSeconds"] == 15
    assert store.spec()["leaseTransitions"] == 0
    assert a.attempted.is_set() and b.attempted.is_set()


async def test_a_standby_takes_over_a_lease_duration_after_it_last_saw_the_record_change():
    """Timed on the standby's own clock from when it saw a change, so its clock (here 1000 s ahead) and the
    renewTime the holder wrote play no part; the holder stops at its renew deadline, before that."""
    store, clock_a, clock_b = Store(), Clock(), Clock(1000.0)
    a, leases_a = elector(store, "a", clock_a)
    b, _ = elector(store, "b", clock_b)

    def at(t: float) -> None:
        clock_a.now, clock_b.now = t, 1000.0 + t

    assert await a.attempt()
    assert not await b.attempt()
    at(10)
    assert await a.attempt()  # renewed: the record changes
    store.spec()["renewTime"] = "2001-01-01T00:00:00.000000Z"  # a wildly wrong clock on the holder's machine
    leases_a.fail = ApiError(500, "InternalError", "etcd is down")  # the holder is cut off from here on
    at(14)
    assert not await b.attempt()  # sees the change of t=10 (and the odd renewTime) only now
    at(19.9)
    assert a.is_leader()
    at(20)
    assert not a.is_leader(), "the holder stops at its renew deadline"
    at(28.9)
    assert not await b.attempt()
    at(29)
    assert await b.attempt(), "a lease duration after the standby saw the last change"
    assert store.spec()["holderIdentity"] == "b"
    assert store.spec()["leaseTransitions"] == 1


async def test_a_failed_renewal_keeps_leadership_until_the_renew_deadline_only():
    store, clock = Store(), Clock()
    a, leases = elector(store, "a", clock)
    assert await a.attempt()
    leases.fail = aiohttp.ClientConnectionError("connection refused")
    clock.now = 5
    assert await a.attempt() is True  # unknown outcome: still within the deadline of the last renewal
    clock.now = 9.99
    assert a.is_leader()
    clock.now = 10
    assert not a.is_leader()
    leases.fail = None
    assert await a.attempt(), "the record is still its own, so it renews"


async def test_a_holder_that_sees_another_holder_stops_at_once():
    store, clock = Store(), Clock()
    a, _ = elector(store, "a", clock)
    assert await a.attempt()
    store.spec()["holderIdentity"] = "b"  # b took over while a's renewals did not reach the server
    store.spec()["renewTime"] = "2030-01-01T00:00:00.000000Z"
    clock.now = 2
    assert await a.attempt() is False
    assert not a.is_leader()


async def test_a_lost_write_race_is_neither_leadership_nor_its_loss():
    store, clock = Store(), Clock()
    a, leases = elector(store, "a", clock)
    leases.conflict_next = True
    assert await a.attempt() is False  # another candidate's create won
    assert await a.attempt() is True
    leases.conflict_next = True
    clock.now = 2
    assert await a.attempt() is True  # a renewal that lost a race: leadership runs on to the deadline
    clock.now = 10
    assert not a.is_leader()


async def test_release_lets_a_standby_take_over_at_its_next_try():
    store, clock = Store(), Clock()
    a, _ = elector(store, "a", clock)
    b, _ = elector(store, "b", clock)
    assert await a.attempt() and not await b.attempt()
    await a.release()
    assert not a.is_leader()
    assert store.spec()["holderIdentity"] == ""
    assert store.spec()["leaseDurationSeconds"] == 1
    clock.now = 2
    assert await b.attempt(), "no lease duration to wait for a released Lease"
    assert store.spec()["holderIdentity"] == "b"
    assert store.spec()["leaseTransitions"] == 1


async def test_release_leaves_alone_a_lease_it_does_not_hold():
    store, clock = Store(), Clock()
    a, _ = elector(store, "a", clock)
    b, _ = elector(store, "b", clock)
    assert await a.attempt()
    await b.release()
    assert store.spec()["holderIdentity"] == "a"
    store.spec()["holderIdentity"] = "c"
    await a.release()  # a still thinks it leads; the record says otherwise
    assert store.spec()["holderIdentity"] == "c"


def test_timing_must_leave_the_holder_time_to_stop_before_a_takeover():
    with pytest.raises(ValueError, match="renew deadline"):
        elector(Store(), "a", Clock(), duration_s=10, renew_deadline_s=10.0)
    with pytest.raises(ValueError, match="retry"):
        elector(Store(), "a", Clock(), retry_s=10.0)


def loop_clock() -> Callable[[], float]:
    """The running loop's clock: under `looptime` it is virtual, so the intervals below are exact and take no time."""
    return asyncio.get_running_loop().time


@pytest.mark.looptime
async def test_the_renew_deadline_ends_leadership_without_any_try():
    store, clock = Store(), loop_clock()
    a, leases = elector(store, "a", clock, duration_s=2, renew_deadline_s=0.3, retry_s=0.1)
    began = clock()
    assert await a.attempt()
    leases.fail = TimeoutError()
    await asyncio.wait_for(a.wait_until(leading=False), 2)
    assert clock() - began == pytest.approx(0.3)
    assert not a.is_leader()


@pytest.mark.looptime
async def test_work_runs_on_the_leader_only_and_stops_before_the_next_leader_starts_it():
    """Two replicas with short timings: the leader's work runs, the standby's does not; cut the leader off
    from the server and its work is cancelled at the renew deadline, well before the standby takes over."""
    store, clock = Store(), loop_clock()
    log: list[tuple[float, str, str]] = []
    timing = {"duration_s": 2, "renew_deadline_s": 1.0, "retry_s": 0.1}

    def work(who: str):
        async def run() -> None:
            log.append((clock(), who, "start"))
            try:
                await asyncio.Future()
            finally:
                log.append((clock(), who, "stop"))
        return run

    a, leases_a = elector(store, "a", clock, **timing)
    b, _ = elector(store, "b", clock, **timing)
    assert await a.attempt()
    tasks = [asyncio.create_task(e.run_forever()) for e in (a, b)]
    tasks += [asyncio.create_task(a.while_leading(work("a"))), asyncio.create_task(b.while_leading(work("b")))]
    try:
        await asyncio.sleep(0.5)
        assert [(who, what) for _, who, what in log] == [("a", "start")]
        cut = clock()
        leases_a.fail = aiohttp.ClientConnectionError("partitioned")
        await asyncio.wait_for(b.wait_until(leading=True), 5)
        await asyncio.sleep(0.1)
        assert [(who, what) for _, who, what in log] == [("a", "start"), ("a", "stop"), ("b", "start")]
        a_stopped, b_started = log[1][0], log[2][0]
        # a renewed at most retry_s before the cut: it stops by its renew deadline after that renewal, and b, which
        # saw that renewal within retry_s of it, waits a whole lease duration from there.
        assert cut - 0.1 - 1e-9 <= a_stopped - 1.0 <= cut + 1e-9
        assert b_started - a_stopped >= 2 - 1.0 - 0.1, "the old leader stops a lease duration minus the deadline earlier"
        assert store.spec()["holderIdentity"] == "b"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.looptime
async def test_work_that_ends_early_is_started_again():
    store = Store()
    a, _ = elector(store, "a", loop_clock(), duration_s=2, renew_deadline_s=1.0, retry_s=0.05)
    starts = 0

    async def flaky() -> None:
        nonlocal starts
        starts += 1
        raise RuntimeError("boom")

    assert await a.attempt()
    renew = asyncio.create_task(a.run_forever())
    lead = asyncio.create_task(a.while_leading(flaky))
    try:
        await asyncio.sleep(0.3)
        assert 6 <= starts <= 7, "started again every retry_s (0.05 s), not in a tight loop"
    finally:
        for task in (renew, lead):
            task.cancel()
        await asyncio.gather(renew, lead, return_exceptions=True)


async def test_cancelling_the_elector_always_stops_it_wherever_the_cancel_lands():
    """A stopping service cancels `run_forever` and waits for it: a cancellation that lands just as a call to
    the API server completes must not be lost (asyncio.wait_for on 3.11 loses it)."""
    store = Store()
    for steps in range(40):
        a, leases = elector(store, "a", time.monotonic, duration_s=2, renew_deadline_s=1.0, retry_s=0.001)
        task = asyncio.create_task(a.run_forever())
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=1)
        if not done:
            leases.fail = RuntimeError("the test stops the loop that ignored its cancellation")
            await asyncio.wait({task}, timeout=1)
        assert done and task.cancelled(), f"still running after a cancel {steps} loop steps in"


async def test_a_fenced_client_refuses_writes_before_sending_them():
    allowed = False
    async with KubeClient(KubeConfig(server="http://127.0.0.1:1"), request_timeout_s=5) as client:
        fenced = client.fenced(lambda: allowed, "not the holder of the Lease")
        for write in (fenced.create(LEASES, {"metadata": {"name": "x"}}, NS),
                      fenced.patch(LEASES, "x", {}, NS), fenced.delete(LEASES, "x", NS)):
            with pytest.raises(Fenced, match="not the holder of the Lease"):
                await write
        # Reads pass the fence (and fail here only because nothing listens on port 1); so do allowed writes.
        with pytest.raises(aiohttp.ClientError):
            await fenced.get(LEASES, "x", NS)
        allowed = True
        with pytest.raises(aiohttp.ClientError):
            await fenced.create(LEASES, {"metadata": {"name": "x"}}, NS)
        assert isinstance(Fenced("x"), ApiError)


async def test_the_gauge_shows_leadership_per_lease_and_identity():
    registry = CollectorRegistry()
    gauge = LeaderGauge(registry)
    clock = Clock()
    a, _ = elector(Store(), "host_1234", clock)
    gauge.track(a)
    labels = {"lease": f"{NS}/{NAME}", "identity": "host_1234"}
    assert registry.get_sample_value("lapilli_leader", labels) == 0.0
    await a.attempt()
    assert registry.get_sample_value("lapilli_leader", labels) == 1.0
    clock.now = 10
    assert registry.get_sample_value("lapilli_leader", labels) == 0.0
