"""Read the Lapilli service's /metrics on a dev cluster: the tests wait on the service's own signals (a session
ran, a gauge moved) instead of sleeping and hoping one did."""

from __future__ import annotations

import contextlib

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from assembly.dev import DevCluster
from tests.e2e.gangs import insecure


async def service_metric(cluster: DevCluster, name: str, labels: dict[str, str] | None = None) -> float | None:
    """The sum of the samples named `name` whose labels include `labels` (None when the service does not answer
    or exports no such sample)."""
    assert cluster.info is not None
    url = f"https://127.0.0.1:{cluster.info.ports['lapilli-webhook']}/metrics"
    with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http, \
                http.get(url, ssl=insecure()) as resp:
            text = await resp.text()
        want = (labels or {}).items()
        values = [s.value for family in text_string_to_metric_families(text) for s in family.samples
                  if s.name == name and want <= s.labels.items()]
        return sum(values) if values else None
    return None


async def sessions_run(cluster: DevCluster) -> float:
    """How many scheduling sessions the leader has run (0 when it cannot say)."""
    return await service_metric(cluster, "lapilli_session_duration_seconds_count") or 0.0
