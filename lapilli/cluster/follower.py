"""Leadership borrowed from the kube-scheduler beside this process: lead while it holds its own Lease.

Lapilli's extender runs in the dedicated scheduler's pod (manifests/scheduler). kube-scheduler names itself in
its Lease as `<hostname>_<uuid>`, and the containers of a pod share the hostname (the pod's name), so the
extender leads exactly while the Lease's holder starts with `<its own hostname>_`: then the only kube-scheduler
that calls it is the one that schedules. No second election is held, so the two can never disagree.

The timing rule is the elector's: leadership lasts until `renew_deadline_s` after the Lease record was last
*seen to change* under this host's holder (kube-scheduler renews every 2 s by default, so it keeps changing),
on this process's monotonic clock. That deadline is shorter than the Lease's duration, so once kube-scheduler
stops renewing — crashed, cut off, or replaced — this extender has stopped acting, and its writes are fenced,
before any other pod's kube-scheduler may take the Lease. A record seen for the first time grants nothing: it
may be the Lease of a kube-scheduler that died; the next renewal proves it alive.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable

from lapilli.cluster.leader import _TRANSIENT, LeaseElector
from lapilli.kube import KubeClient
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import LEASES

log = logging.getLogger("lapilli.leader")


class LeaseFollower(LeaseElector):
    """Follows Lease `namespace/name` held by kube-scheduler; `is_leader`, `wait_until`, `fence` and
    `while_leading` behave as the elector's. It never writes the Lease."""

    def __init__(
        self, client: KubeClient, namespace: str, name: str, *, hostname: str | None = None,
        renew_deadline_s: float = 10.0, retry_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
    ) -> None:
        host = hostname or socket.gethostname()
        super().__init__(client, namespace, name, identity=f"{host}_", duration_s=int(renew_deadline_s) + 5,
                         renew_deadline_s=renew_deadline_s, retry_s=retry_s, clock=clock)
        self.prefix = self.identity
        self._seen = False

    async def attempt(self) -> bool:
        """Read the Lease once; whether this host's kube-scheduler is seen holding and renewing it."""
        try:
            async with asyncio.timeout(self.renew_deadline_s):
                lease = await self.client.get(LEASES, self.name, self.namespace)
        except NotFound:
            lease = {}
        except _TRANSIENT as exc:  # the deadline keeps running from the last renewal seen
            log.warning("Lease %s: %s", self.lease, exc or type(exc).__name__)
            lease = None
        if lease is not None:
            spec = lease.get("spec") or {}
            before = self._observed_at
            self._observe(spec)
            renewed = self._seen and self._observed_at != before
            self._seen = True
            if not (spec.get("holderIdentity") or "").startswith(self.prefix):
                self._lapses_at = None
            elif renewed:
                self._lapses_at = self._observed_at + self.renew_deadline_s
        self.attempted.set()
        return self._announce()

    async def release(self) -> None:
        """Nothing to give up (the Lease is kube-scheduler's); only stop counting as leader."""
        self._lapses_at = None
        self._announce()
