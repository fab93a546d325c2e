"""Watch expiry: the service's reflectors lose their watches, the cluster changes meanwhile (a Job created, a
pod deleted), etcd is compacted past every resourceVersion they hold, and their server comes back: resuming
answers 410 Gone, they re-list, and nothing that happened in the gap is missed — the new Job gets its PodGroup
and pods, the deleted pod is made again, every Job completes.

The gap is an HA control plane's: the service's kube-apiserver is killed while a second one on the same etcd
keeps serving users (and calls the webhook); the first comes back with a fresh watch cache that starts after
the compaction."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from lapilli.kube.resources import PODGROUPS, PODS
from tests.e2e.faults.helpers import (
    NS,
    assert_nothing_lost,
    gang_job,
    kill_apiserver,
    pods_of,
    record,
    second_apiserver,
    start_apiserver,
    submit,
    wait_completed,
)
from tests.e2e.test_controller_helpers import eventually

RELISTED = re.compile(r"(\S+): resourceVersion \d+ expired, re-listing")


async def test_a_job_created_and_a_pod_deleted_during_the_gap_are_seen_after_410(faults):
    api = faults.client
    assert api is not None and faults.info is not None
    log = Path(record(faults, "lapilli").log)
    async with second_apiserver(faults) as other:
        await submit(api, gang_job("steady", duration="30s"))

        async def steady_runs() -> bool:
            pods = await pods_of(api, "steady")
            return len(pods) == 4 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

        await eventually(steady_runs, 90, "Job steady running")
        victim = next(p for p in await pods_of(api, "steady") if p["metadata"]["name"] == "steady-w-1")
        log_offset = log.stat().st_size

        rec = await kill_apiserver(faults)  # the gap begins: the service's watches are cut
        job = await submit(other, gang_job("gap", duration="2s"))
        await other.delete(PODS, "steady-w-1", NS, grace_period_seconds=0)
        await asyncio.sleep(1)
        revision = await faults.compact_etcd()  # every resourceVersion the reflectors hold is gone
        await start_apiserver(faults, rec)
        began = time.monotonic()

        async def gap_job_reconciled() -> bool:
            groups = [g for g in (await api.list(PODGROUPS, NS)).items
                      if any(r.get("uid") == job["metadata"]["uid"] for r in g["metadata"].get("ownerReferences", []))]
            return len(groups) == 1 and len(await pods_of(api, "gap")) == 4

        await eventually(gap_job_reconciled, 90, "the Job created in the gap has its PodGroup and pods")

        async def victim_made_again() -> bool:
            pods = {p["metadata"]["name"]: p for p in await pods_of(api, "steady")}
            again = pods.get("steady-w-1")
            return again is not None and again["metadata"]["uid"] != victim["metadata"]["uid"]

        await eventually(victim_made_again, 90, "the pod deleted in the gap made again")
        seen_s = time.monotonic() - began

        def relisted() -> set[str]:
            return set(RELISTED.findall(log.read_bytes()[log_offset:].decode(errors="replace")))

        async def caches_relisted() -> bool:
            return {"pods", "vcjobs"} <= relisted()

        # The controllers may act on the gap before the webhook's Job cache is back: each reflector reconnects
        # after its own jittered back-off (up to 5 s), so its 410 can come after the checks above pass.
        await eventually(caches_relisted, 30, "the pods and vcjobs reflectors re-listed after 410")
        print(f"\netcd compacted at revision {revision}; after 410 the service re-listed {sorted(relisted())}; the "
              f"gap's changes were acted on {seen_s:.1f}s after kube-apiserver came back")
        await wait_completed(api, ["steady", "gap"], 180)
    await assert_nothing_lost(api, ["gap"])
