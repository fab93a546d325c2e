"""Leader election on a coordination.k8s.io Lease (client-go's leaderelection, reduced to what we need).

The permit cache and plans live in memory, so only one replica may answer the extender verbs: the one holding
the Lease. Others keep their caches warm and take over once the holder stops renewing for a lease duration.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from lapilli.kube import KubeClient
from lapilli.kube.errors import ApiError, Conflict, NotFound
from lapilli.kube.resources import LEASES

log = logging.getLogger("lapilli.extender")


def _micro_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(value: str | None) -> float:
    if not value:
        return 0.0
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


class LeaseElector:
    def __init__(
        self, client: KubeClient, namespace: str, name: str, *, duration_s: int = 15, retry_s: float = 2.0
    ) -> None:
        self.client, self.namespace, self.name = client, namespace, name
        self.duration_s, self.retry_s = duration_s, retry_s
        self.identity = f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self._renewed_at = 0.0  # monotonic time of the last successful acquire/renew

    def is_leader(self) -> bool:
        return time.monotonic() - self._renewed_at < self.duration_s

    async def run_forever(self) -> None:
        while True:
            try:
                if await self._try():
                    self._renewed_at = time.monotonic()
            except ApiError as exc:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            await asyncio.sleep(self.retry_s)

    async def _try(self) -> bool:
        now = time.time()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration_s,
            "renewTime": _micro_time(now),
        }
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except NotFound:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": _micro_time(now), "leaseTransitions": 0},
            }
            try:
                await self.client.create(LEASES, body, self.namespace)
            except Conflict:
                return False
            log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
            return True
        current = lease.get("spec") or {}
        holder = current.get("holderIdentity")
        expired = _parse(current.get("renewTime")) + float(current.get("leaseDurationSeconds") or 0) < now
        if holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec["acquireTime"] = _micro_time(now)
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
            log.info("taking over lease %s/%s from %s", self.namespace, self.name, holder)
        lease["spec"] = {**current, **spec}
        try:
            await self.client.replace(LEASES, lease, self.namespace)
        except Conflict:
            return False
        return True
