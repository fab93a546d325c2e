"""A gang parked at the bind verb when the service dies is bound whole soon after the next one is ready (issue 19).

Three members of a four-pod gang wait at the extender's bind verb for the fourth, which kube-scheduler holds back on
its own (it mounts a claim that does not exist yet: VolumeBinding; the session does not model volumes and planned it
anyway). The service is SIGKILLed with them parked: kube-scheduler's bind calls fail and it sets the three aside.
The claim then appears (bound, as the absent PV controller would leave it) while no service runs: kube-scheduler
tries all four again, meets no extender, and sets them aside once more, now until they change or its 60 s
unschedulable flush. The restarted service — the same identity, as a Deployment's new container — must bind the gang
whole, and before that flush: only the new term's touch of every unbound gang member (`SessionLoop.requeue_pending`)
brings them back sooner (with it switched off this test fails, checked). Issue 19 saw 2 of 6 such gangs wait 70-75 s.
The time from ready to whole is printed for bench/faults.py (the goal: 10 s)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp

from lapilli.kube import NotFound
from lapilli.kube.resources import PODGROUPS, PODS, Resource
from tests.e2e.faults.helpers import GROUP, NS, record, service_ready, sigkill_service
from tests.e2e.gangs import GangSampler, insecure
from tests.e2e.test_controller_helpers import eventually
from tests.e2e.timing import timing

PERSISTENT_VOLUMES = Resource("v1", "persistentvolumes", "PersistentVolume", namespaced=False)
PVCS = Resource("v1", "persistentvolumeclaims", "PersistentVolumeClaim")
GANG, CLAIM = "parked", "parked-data"
# kube-scheduler 1.20 brings a pod it set aside back after 60 s in its unschedulable queue (checked every 30 s).
UNSCHEDULABLE_FLUSH_S = 60.0
SET_ASIDE = re.compile(rf'"Error scheduling pod; retrying".*pod="{NS}/({GANG}-\d)"')


def member(i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "volcano", "restartPolicy": "Never", "containers": [
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}
    if i == 3:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{GANG}-{i}", "namespace": NS, "annotations": {GROUP: GANG, "sim.lapilli.io/duration": "1h"}},
        "spec": spec}


async def parked_at_bind(cluster: Any) -> int:
    """The service's permit cache: pods parked at its bind verb (-1 when it does not answer)."""
    url = f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/metrics"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as http, \
                http.get(url, ssl=insecure()) as resp:
            text = await resp.text()
    except (aiohttp.ClientError, OSError, TimeoutError):
        return -1
    values = [line.split()[-1] for line in text.splitlines() if line.startswith("lapilli_gang_permit_waiting_pods ")]
    return int(float(values[0])) if values else -1


def set_aside_since(log: Path, offset: int) -> list[str]:
    """The gang's pods kube-scheduler set aside after an error (a failed bind, no extender at filter), in order,
    since byte `offset` of its log (MakeDefaultErrorFunc logs each one just before it requeues the pod)."""
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [m.group(1) for m in SET_ASIDE.finditer(text)]


async def settled(log: Path, offset: int, names: set[str], quiet_s: float = 5.0) -> None:
    """Wait until every pod in `names` was set aside since `offset` and none again for `quiet_s`: a pod kube-
    scheduler sent to back-off (at most 4 s for these) has been tried again, so each waits in its unschedulable
    queue."""
    last: list[str] = []
    since = time.monotonic()

    async def quiet() -> bool:
        nonlocal last, since
        seen = [name for name in set_aside_since(log, offset) if name in names]
        if seen != last:
            last, since = seen, time.monotonic()
        return set(seen) >= names and time.monotonic() - since >= quiet_s

    await eventually(quiet, 60, f"kube-scheduler set aside {sorted(names)} and left them there")


def claim_objects() -> tuple[dict[str, Any], dict[str, Any]]:
    """The PersistentVolume and its claim, bound to each other (as the absent PV controller would leave them)."""
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{NS}-{CLAIM}"},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"},
                   "claimRef": {"namespace": NS, "name": CLAIM}}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": CLAIM, "namespace": NS, "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                    "volumeName": f"{NS}-{CLAIM}"}}
    return pv, pvc


async def test_a_gang_parked_at_bind_when_the_service_dies_is_bound_whole_soon_after_the_restart(faults):
    api = faults.client
    assert api is not None

    async def members() -> list[dict[str, Any]]:
        return [p for p in (await api.list(PODS, NS)).items if p["metadata"]["name"].startswith(f"{GANG}-")]

    async def three_parked() -> bool:
        return await parked_at_bind(faults) == 3

    names = {f"{GANG}-{i}" for i in range(4)}
    log = Path(record(faults, "kube-scheduler").log)

    async def whole() -> bool:
        return sum(1 for p in await members() if p["spec"].get("nodeName")) == 4

    await api.create(PODGROUPS, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                 "metadata": {"name": GANG, "namespace": NS},
                                 "spec": {"minMember": 4, "queue": "default"}}, NS)
    try:
        for i in range(4):
            await api.create(PODS, member(i), NS)
        await eventually(three_parked, 90, "three members parked at the bind verb, the fourth held by kube-scheduler")
        pv, pvc = claim_objects()
        await api.create(PERSISTENT_VOLUMES, pv)  # its event moves only the fourth back: the rest are at bind

        supervisor = record(faults, "lapilli").pid
        os.kill(supervisor, signal.SIGSTOP)  # no service runs until the claim's retries have failed
        try:
            offset = log.stat().st_size
            killed = sigkill_service(faults)
            # The three binds fail at once and kube-scheduler sets the three aside (through a back-off and a retry
            # that meets no extender, when some event came while they were at bind).
            await settled(log, offset, names - {f"{GANG}-3"})
            # The claim moves every pod set aside back to the queue; each retry meets no extender and sets it
            # aside again, now until it changes or the flush. A pod retried only after the restart would meet the
            # new service's held filter and prove nothing, so the service stays down until all four were.
            offset = log.stat().st_size
            claimed = time.monotonic()
            await api.create(PVCS, pvc, NS)
            await settled(log, offset, names)
        finally:
            os.kill(supervisor, signal.SIGCONT)
        restarted = time.monotonic()

        async with GangSampler(api, faults, interval_s=0.25) as sampler:
            await service_ready(faults, not_pid=killed)
            ready = time.monotonic()
            # A bound that ends before kube-scheduler's flush could bring them back (each was set aside after the
            # claim appeared), so a gang nobody touched fails here; the goal's 10 s is measured, not asserted
            # (tests/e2e/timing.py).
            left = claimed + UNSCHEDULABLE_FLUSH_S - 5 - time.monotonic()
            await eventually(whole, left, "the parked gang bound whole after the restart, before kube-scheduler's "
                                          "unschedulable flush")
            done = time.monotonic()
        timing("takeover.service_ready_s", ready - restarted)
        timing("takeover.parked_gang_whole_after_ready_s", done - ready)
        assert sampler.partly_bound() == {}, "the gang was seen partly bound (the one rule, tests/e2e/gangs.py)"
    finally:  # the package's cluster stays whole for the next test
        for pod in await members():
            await api.delete(PODS, pod["metadata"]["name"], NS, grace_period_seconds=0)
        for res, name, namespace in ((PODGROUPS, GANG, NS), (PVCS, CLAIM, NS),
                                     (PERSISTENT_VOLUMES, f"{NS}-{CLAIM}", None)):
            with contextlib.suppress(NotFound):
                await api.delete(res, name, namespace)
