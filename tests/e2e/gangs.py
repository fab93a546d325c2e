"""Gangs partly bound: the one rule every e2e test applies (`partly_bound`), and the sampler that feeds it.

A gang is all-or-nothing at the bind verb, but Kubernetes binds pod by pod: a look at the pods can land between a
released gang's Bindings. The rule says when a sighting is a gang left partly bound; tests that claim "bound
together" sample with `GangSampler` and assert `partly_bound()` is empty, instead of comparing bind times on the
wall clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import aiohttp

from assembly.dev import DevCluster
from lapilli.kube import ApiError, KubeClient
from lapilli.kube.resources import PODGROUPS, PODS

GROUP = "scheduling.k8s.io/group-name"


def insecure() -> ssl.SSLContext:
    """The dev cluster's webhook certificate is its own: the tests reach its port without verifying it."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context



@dataclass(frozen=True, slots=True)
class Sample:
    """One look at the namespace: the gangs seen partly bound (some pods on a node or finished there, fewer than
    the PodGroup's minMember), and whether a gang release of the service overlapped the look (None: the service
    could not say — unreachable, or restarted while it was asked)."""

    at: float
    partial: frozenset[str]
    releasing: bool | None


def partly_bound(samples: Sequence[Sample]) -> dict[str, str]:
    """The gangs the samples show partly bound, each with why; the one rule of the fault tests.

    A gang's release (extender/service/permit.py) sends its Bindings as separate POSTs at once, and a gang evicted
    whole (gangpreempt, gangreclaim) its pods' Eviction calls, so a look at the pods can land between them and see
    the gang partly bound for those milliseconds, with nothing wrong. Such a sighting is excused only when it could
    be that:
    - the service shows a release or an eviction overlapping the look (`lapilli_gang_releases_in_flight` or
      `lapilli_evictions_in_flight` > 0 just before it, or `lapilli_gang_releases_total` or
      `lapilli_evictions_total` grown just after it). The service does not say whose, so any one excuses the
      sighting; when it cannot say at all, nothing is excused;
    - and the next look does not see the gang partly bound again: a release is answered in milliseconds, far
      within one sampling interval, so two sightings in a row are a gang left partly bound.
    """
    found: dict[str, str] = {}
    for i, sample in enumerate(samples):
        for gang in sorted(sample.partial - found.keys()):
            if i + 1 < len(samples) and gang in samples[i + 1].partial:
                found[gang] = f"partly bound at samples {i} and {i + 1} in a row"
            elif sample.releasing is not True:
                why = "no gang release under way" if sample.releasing is False else "the service could not say"
                found[gang] = f"partly bound at sample {i}, {why}"
    return found


async def release_counts(cluster: DevCluster) -> tuple[float, float] | None:
    """The service's gang releases so far and under way, from its /metrics (None when it does not answer)."""
    assert cluster.info is not None
    return await release_counts_at(f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/metrics")


async def release_counts_at(url: str) -> tuple[float, float] | None:
    """A Lapilli /metrics page's gang releases and evictions so far and under way (None when it does not answer or
    has none): either may leave a gang partly bound for a moment."""
    with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http, \
                http.get(url, ssl=insecure() if url.startswith("https:") else None) as resp:
            text = await resp.text()
        pattern = r"^(lapilli_gang_releases\w*|lapilli_evictions_total|lapilli_evictions_in_flight) (\S+)$"
        values = {m[0]: float(m[1]) for m in re.findall(pattern, text, re.M)}
        if "lapilli_gang_releases_total" in values and "lapilli_gang_releases_in_flight" in values:
            return (values["lapilli_gang_releases_total"] + values.get("lapilli_evictions_total", 0.0),
                    values["lapilli_gang_releases_in_flight"] + values.get("lapilli_evictions_in_flight", 0.0))
    return None


def overlapped(before: Sequence[tuple[float, float] | None], after: Sequence[tuple[float, float] | None]) -> bool | None:
    """Whether a gang release overlapped a look, from each service's release counts just before and just after it
    (None: some service could not say, so nothing is excused)."""
    found = False
    for b, a in zip(before, after, strict=True):
        if b is None or a is None:
            return None
        found = found or b[1] > 0 or a[0] > b[0]
    return found


@dataclass
class GangSampler:
    """Looks at `namespace`'s pods every `interval_s` (through `api`), asking `cluster`'s service about its gang
    releases just before and just after each look; `partly_bound()` applies the rule to what it saw. `partial`
    holds each gang's first and last partial sighting; `longest_s` is the longest time one gang stayed so, from
    its first to its last sighting plus one interval."""

    api: KubeClient
    cluster: DevCluster
    interval_s: float = 1.0
    namespace: str = "faults"
    history: list[Sample] = field(default_factory=list)
    partial: dict[str, tuple[float, float]] = field(default_factory=dict)  # gang -> (first, last) sighting
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> GangSampler:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    @property
    def samples(self) -> int:
        return len(self.history)

    def partly_bound(self) -> dict[str, str]:
        return partly_bound(self.history)

    def unasked(self) -> int:
        """Samples the service could not tell about its releases (down, restarted): none excuses a sighting."""
        return sum(1 for s in self.history if s.releasing is None)

    @property
    def longest_s(self) -> float:
        return max((last - first + self.interval_s for first, last in self.partial.values()), default=0.0)

    async def sample(self) -> None:
        pid, before = self.cluster.service_pid(), await release_counts(self.cluster)
        pods = (await self.api.list(PODS, self.namespace)).items
        groups = {pg["metadata"]["name"]: int(pg["spec"].get("minMember") or 1)
                  for pg in (await self.api.list(PODGROUPS, self.namespace)).items}
        after = await release_counts(self.cluster)
        releasing = None
        if pid is not None and self.cluster.service_pid() == pid:
            releasing = overlapped([before], [after])
        bound: dict[str, int] = {}
        for pod in pods:
            group = (pod["metadata"].get("annotations") or {}).get(GROUP)
            if group and pod["spec"].get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                bound[group] = bound.get(group, 0) + 1
        now = time.monotonic()
        partial = frozenset(g for g, count in bound.items() if g in groups and count < groups[g])
        self.history.append(Sample(now, partial, releasing))
        for group in partial:
            first, _ = self.partial.get(group, (now, now))
            self.partial[group] = (first, now)

    async def _run(self) -> None:
        while True:
            began = time.monotonic()
            with contextlib.suppress(ApiError, aiohttp.ClientError, OSError, TimeoutError):
                await self.sample()  # an API server outage skips samples, it does not end the sampling
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - began)))


@contextlib.asynccontextmanager
async def never_partly_bound(cluster: DevCluster, namespace: str, interval_s: float = 0.5) -> AsyncIterator[GangSampler]:
    """Sample `namespace` for as long as the block runs; on leaving it normally, fail if the one rule finds a gang
    partly bound (what a test means by "the gang binds together")."""
    assert cluster.client is not None
    async with GangSampler(cluster.client, cluster, interval_s=interval_s, namespace=namespace) as sampler:
        yield sampler
        await sampler.sample()  # at least one look, and one after the last thing the block did
    assert not sampler.partly_bound(), f"gangs partly bound in {namespace}: {sampler.partly_bound()}"
