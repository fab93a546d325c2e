"""The service SIGKILLed while gangs are parked at bind and being bound: `lapilli dev` restarts it as a
Deployment would; a gang found partly bound is completed first, within seconds of the restart; every Job
completes with exactly its pods; the longest time any gang stayed partly bound is printed (bench/README).

A kill inside the release window (between a gang's Bindings, a few milliseconds) is made certain in the first
test by building its outcome by hand while the service is down: one member bound, the rest pending. The second
test kills the service many times at random moments while gangs churn, as an operator's bad day would."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

from lapilli.kube.resources import NODES, PODGROUPS, PODS
from tests.e2e.faults.helpers import (
    NS,
    assert_nothing_lost,
    gang_job,
    pods_of,
    record,
    service_pid,
    service_ready,
    sigkill_service,
    submit,
    wait_completed,
)
from tests.e2e.gangs import GangSampler
from tests.e2e.test_controller_helpers import eventually
from tests.e2e.timing import timing


def gpu_hog(name: str, gpus: int) -> dict:
    """A plain default-scheduler pod holding GPUs until deleted."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS,
                                                           "annotations": {"sim.lapilli.io/duration": "1h"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


async def test_a_gang_left_partly_bound_by_a_crash_is_completed_within_seconds_of_the_restart(faults):
    api = faults.client
    assert api is not None
    nodes = sorted(n["metadata"]["name"] for n in (await api.list(NODES)).items)
    # 5 of 8 GPUs held: enqueue admits the gang (8 x 1.2 overcommit - 5 >= 4), so it gets its pods, but 3 free GPUs
    # cannot place it: it waits, pending, as gangs do behind running work.
    hogs = [gpu_hog("hog-0", 4), gpu_hog("hog-1", 1)]
    for hog in hogs:
        await api.create(PODS, hog, NS)

    async def hogs_run() -> bool:
        phases = [(await api.get(PODS, h["metadata"]["name"], NS)).get("status", {}).get("phase") for h in hogs]
        return phases == ["Running"] * len(hogs)

    await eventually(hogs_run, 60, "the GPU hogs run")
    job = await submit(api, gang_job("half", duration="2s"))

    async def pending_gang() -> bool:
        groups = (await api.list(PODGROUPS, NS)).items
        return len(await pods_of(api, "half")) == 4 and any(g["metadata"]["name"].startswith("half-") for g in groups)

    await eventually(pending_gang, 60, "Job half has its PodGroup and 4 pending pods")

    # The crash: the supervisor is held, the service killed; then the cluster is left as a kill between a
    # gang's Bindings leaves it (one member bound), with room for the rest.
    supervisor = record(faults, "lapilli").pid
    os.kill(supervisor, signal.SIGSTOP)
    try:
        killed = sigkill_service(faults)
        for hog in hogs:
            await api.delete(PODS, hog["metadata"]["name"], NS, grace_period_seconds=0)
        first = next(p for p in await pods_of(api, "half") if p["metadata"]["name"] == "half-w-0")
        await api.bind(NS, "half-w-0", nodes[0], uid=first["metadata"]["uid"])
    finally:
        os.kill(supervisor, signal.SIGCONT)
    restarted = time.monotonic()
    async with GangSampler(api, faults, interval_s=0.25) as sampler:
        await service_ready(faults, not_pid=killed)
        ready_s = time.monotonic() - restarted

        async def whole() -> bool:
            return sum(1 for p in await pods_of(api, "half") if p["spec"].get("nodeName")) == 4

        await eventually(whole, 60, "the partly bound gang completed after the restart")
        completed_s = time.monotonic() - restarted
    timing("crash.service_ready_s", ready_s)
    timing("crash.gang_whole_after_restart_s", completed_s)
    timing("crash.partly_bound_s", sampler.longest_s)
    await wait_completed(api, ["half"], 60)
    await assert_nothing_lost(api, ["half"])
    assert job["metadata"]["uid"]


async def test_many_kills_while_gangs_park_and_bind_lose_nothing_and_break_no_gang(faults):
    api = faults.client
    assert api is not None
    names = [f"churn-{i}" for i in range(8)]  # 8 gangs of 4 GPUs on 8 GPUs: two at a time, the rest waiting
    rng = random.Random(20261124)
    kills = 0
    async with GangSampler(api, faults, interval_s=0.25) as sampler:
        for name in names:
            await submit(api, gang_job(name, duration="2s"))
        for _ in range(6):
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            pid = service_pid(faults)
            sigkill_service(faults)
            kills += 1
            await service_ready(faults, not_pid=pid)  # `lapilli dev` started it again
        await wait_completed(api, names, 240)
    await assert_nothing_lost(api, names)
    timing("churn.longest_partly_bound_s", sampler.longest_s)
    # Every gang completed, so none stayed partly bound; how long the longest did is a number for bench/README.
