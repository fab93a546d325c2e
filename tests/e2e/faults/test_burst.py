"""A burst: 40 Volcano Jobs of 4 one-GPU pods submitted at once on 8 GPUs. All complete, each with exactly its
pods, and no gang is partly bound at two samples in a row (every second).

A gang's Bindings are four writes the permit cache sends together; a list that lands between them (a window of
milliseconds on this machine) sees the gang mid-release. The next sample must find it whole: a gang left partly
bound — what gang scheduling forbids — would be seen there again."""

from __future__ import annotations

import asyncio
import time

from tests.e2e.faults.helpers import GangSampler, assert_nothing_lost, gang_job, submit, wait_completed


async def test_forty_gangs_at_once_on_eight_gpus_complete_and_none_is_ever_partly_bound(faults):
    api = faults.client
    assert api is not None
    names = [f"burst-{i:02d}" for i in range(40)]
    began = time.monotonic()
    async with GangSampler(api, interval_s=1.0) as sampler:
        await asyncio.gather(*(submit(api, gang_job(name, duration="2s")) for name in names))
        await wait_completed(api, names, 600)
    took = time.monotonic() - began
    await assert_nothing_lost(api, names)
    print(f"\nburst: 40 gangs of 4 on 8 GPUs completed in {took:.0f}s; {sampler.samples} samples, "
          f"{len(sampler.partial)} gangs seen partly bound")
    assert sampler.samples >= took * 0.5, "the sampler fell behind"
    assert not sampler.lasting(), f"gangs partly bound at consecutive samples: {sampler.lasting()}"
