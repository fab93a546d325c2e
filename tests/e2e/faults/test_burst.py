"""A burst: 40 Volcano Jobs of 4 one-GPU pods submitted at once on 8 GPUs. All complete, each with exactly its
pods, and at no sample (every second) is a gang partly bound, by the rule of `tests/e2e/gangs.partly_bound`: a sighting
between the Bindings of a release the service shows under way is excused once, never twice in a row."""

from __future__ import annotations

import asyncio
import time

from tests.e2e.faults.helpers import assert_nothing_lost, gang_job, submit, wait_completed
from tests.e2e.gangs import GangSampler
from tests.e2e.timing import timing


async def test_forty_gangs_at_once_on_eight_gpus_complete_and_none_is_ever_partly_bound(faults):
    api = faults.client
    assert api is not None
    names = [f"burst-{i:02d}" for i in range(40)]
    began = time.monotonic()
    async with GangSampler(api, faults, interval_s=1.0) as sampler:
        await asyncio.gather(*(submit(api, gang_job(name, duration="2s")) for name in names))
        await wait_completed(api, names, 600)
    took = time.monotonic() - began
    await assert_nothing_lost(api, names)
    timing("burst.forty_gangs_completed_s", took)
    assert sampler.samples >= 10, "too few samples to say anything"
    assert sampler.unasked() == 0, "the service answered about its releases at every sample (it never went down)"
    assert not sampler.partly_bound(), f"gangs partly bound: {sampler.partly_bound()}"
