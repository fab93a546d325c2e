"""kube-apiserver killed (SIGKILL: every watch cut at once) and restarted while Jobs run: a Job created during
the outage (through a second kube-apiserver on the same etcd, as an HA control plane keeps serving users) and one
created as soon as the first is back each get their PodGroup and pods, the Jobs that were running complete,
nothing is lost and no gang is seen partly bound. Then more drops right after an outage: the reflectors are back in
seconds (their back-off restarts once the server accepts them again; it used to wait for a watch to run to its
server timeout, leaving them blind for up to 30 s)."""

from __future__ import annotations

import asyncio
import time

from lapilli.kube.resources import PODGROUPS
from tests.e2e.faults.helpers import (
    NS,
    api_answers,
    assert_nothing_lost,
    gang_job,
    kill_apiserver,
    pods_of,
    second_apiserver,
    start_apiserver,
    submit,
    wait_completed,
)
from tests.e2e.gangs import GangSampler
from tests.e2e.test_controller_helpers import eventually
from tests.e2e.timing import timing


async def running(api, name: str) -> bool:
    pods = await pods_of(api, name)
    return len(pods) == 4 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


async def podgroup_and_pods(api, job: dict) -> bool:
    """The Job has its one PodGroup (owned by it, by UID) and its four pods."""
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    groups = [g for g in (await api.list(PODGROUPS, NS)).items
              if any(r.get("uid") == uid for r in g["metadata"].get("ownerReferences", []))]
    return len(groups) == 1 and len(await pods_of(api, name)) == 4


async def test_watches_recover_after_an_apiserver_restart_and_jobs_made_during_and_after_run(faults):
    api = faults.client
    assert api is not None
    before = ["before-0", "before-1"]
    async with second_apiserver(faults) as other, GangSampler(other, faults) as sampler:  # samples the outage too
        for name in before:
            await submit(api, gang_job(name, duration="15s"))
        for name in before:
            await eventually(lambda name=name: running(api, name), 90, f"{name} running")
        rec = await kill_apiserver(faults)
        during = await submit(other, gang_job("during", duration="2s"))  # the service's watches are cut
        await asyncio.sleep(5)  # the outage goes on: reflectors retry and back off
        assert not await pods_of(other, "during"), "no controller saw the Job while its kube-apiserver was down"
        await start_apiserver(faults, rec)
        await api_answers(api)
        after = await submit(api, gang_job("after", duration="2s"))  # as soon as the webhook answers again
        await eventually(lambda: podgroup_and_pods(api, during), 60, "the Job made in the outage has its pods")
        await eventually(lambda: podgroup_and_pods(api, after), 60, "the Job made after the restart has its pods")
        await wait_completed(api, [*before, "during", "after"], 180)
    await assert_nothing_lost(api, [*before, "during", "after"])
    print(f"\nkube-apiserver restart: {sampler.samples} samples, {len(sampler.partial)} gangs seen partly bound, "
          f"the longest {sampler.longest_s:.1f}s")
    assert sampler.unasked() == 0, "the service answered about its releases at every sample (it never went down)"
    assert not sampler.partly_bound(), f"gangs partly bound: {sampler.partly_bound()}"


async def test_reflectors_are_back_in_seconds_after_an_outage_and_more_drops(faults):
    api = faults.client
    assert api is not None
    rec = await kill_apiserver(faults)
    await asyncio.sleep(8)  # long enough for every reflector's back-off to grow
    await start_apiserver(faults, rec)
    await api_answers(api)
    await asyncio.sleep(2)  # the reflectors reconnect ...
    for _ in range(2):  # ... and the connection drops twice more
        rec = await kill_apiserver(faults)
        await start_apiserver(faults, rec)
    await api_answers(api)
    back = time.monotonic()
    await submit(api, gang_job("after-drops", duration="1s"))
    admitted = time.monotonic() - back

    async def made() -> bool:
        return len(await pods_of(api, "after-drops")) == 4

    await eventually(made, 60, "the Job after the drops has its pods")
    made_s = time.monotonic() - back

    async def placed() -> bool:
        pods = await pods_of(api, "after-drops")
        return len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)

    await eventually(placed, 90, "the Job after the drops placed")
    placed_s = time.monotonic() - back
    # Placement also waits for kube-scheduler's own client-go reflectors, whose back-off has the 30 s cap.
    timing("drops.job_admitted_s", admitted)
    timing("drops.pods_made_s", made_s)
    timing("drops.pods_placed_s", placed_s)
    await wait_completed(api, ["after-drops"], 60)
    await assert_nothing_lost(api, ["after-drops"])
