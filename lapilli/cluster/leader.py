"""Leader election on a coordination.k8s.io Lease: client-go's `leaderelection` with a Lease lock, reduced to
what Lapilli needs (kernel: the extender and the controllers each hold a Lease of their own).

Only one replica may answer the extender verbs (the permit cache and plans live in memory) and only one may
run the controllers (two would both act on every Job; Volcano's vc-controller-manager is leader-elected for
the same reason). The rules are client-go's:

* A candidate reads the Lease every `retry_s`. It takes the Lease when there is none, when it has no holder
  (released at shutdown), or when its record has not changed for the `leaseDurationSeconds` it declares,
  timed on the candidate's own monotonic clock from when the candidate saw it change. The `renewTime`
  written in it is never compared with the local clock, so the machines' clocks need not agree.
* The holder renews every `retry_s` and counts itself leader only until `renew_deadline_s` after the start of
  its last successful renewal. That is shorter than the lease duration, so a holder cut off from the API
  server has stopped before anyone may take over. Seeing another holder ends leadership at once.
* A holder that stops gracefully releases the Lease (no holder, a one-second duration), so another replica
  takes over at its next try rather than a lease duration later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from prometheus_client import CollectorRegistry, Gauge

from lapilli.kube import REQUEST_ERRORS, KubeClient
from lapilli.kube.errors import Conflict, NotFound
from lapilli.kube.resources import LEASES
from lapilli.times import rfc3339_micro

log = logging.getLogger("lapilli.leader")

# What one try at the Lease may fail with and still be tried again.
_TRANSIENT: Final = REQUEST_ERRORS

T = TypeVar("T")


IDENTITY_ENV: Final = "LAPILLI_LEADER_IDENTITY"
"""Set by whatever restarts a process in place (`lapilli dev supervise`), as a pod's containers share its name."""


def default_identity() -> str:
    """`<hostname>_<random>`, as client-go's components name themselves: the pod's name, unique per process."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class LeaseElector:
    """Competes for one Lease: `run_forever` keeps trying, `is_leader` and `wait_until` tell the outcome,
    `while_leading` and `until_lost` run work for as long as the Lease is held, `release` gives it up."""

    def __init__(
        self, client: KubeClient, namespace: str, name: str, *, identity: str | None = None,
        duration_s: int = 15, renew_deadline_s: float = 10.0, retry_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < retry_s < renew_deadline_s < duration_s:
            raise ValueError(f"Lease timing needs 0 < retry ({retry_s}s) < renew deadline ({renew_deadline_s}s)"
                             f" < duration ({duration_s}s)")
        self.client, self.namespace, self.name = client, namespace, name
        self.identity = identity or default_identity()
        self.duration_s, self.renew_deadline_s, self.retry_s = duration_s, renew_deadline_s, retry_s
        self._clock = clock
        # Clock time at which leadership lapses: the start of the last successful acquire/renew plus the renew
        # deadline. Kept as one sum so `is_leader` and `wait_until` compare the same number (computed two ways, a
        # float rounding could leave one leading at the instant the other has run out, and never wake again).
        self._lapses_at: float | None = None
        self._observed: tuple[Any, ...] | None = None  # the Lease record as last read
        self._observed_at = 0.0  # clock time at which that record was first seen
        self._announced = False
        self._changed = asyncio.Event()  # replaced on every change of leadership; waiters hold the old one
        self.attempted = asyncio.Event()  # set once the first try is over, whatever came of it

    @property
    def lease(self) -> str:
        return f"{self.namespace}/{self.name}"

    def is_leader(self) -> bool:
        return self._lapses_at is not None and self._clock() < self._lapses_at

    def fence(self, client: KubeClient, holder: str) -> KubeClient:
        """`client` with its writes refused while this replica does not hold the Lease (`holder` names whose
        Lease it is in the refusal: "the extender's")."""
        return client.fenced(self.is_leader, f"this replica no longer holds {holder} Lease {self.lease}")

    async def run_forever(self) -> None:
        while True:
            await self.attempt()
            await asyncio.sleep(self.retry_s)

    async def attempt(self) -> bool:
        """One try to acquire or renew the Lease; whether this replica leads afterwards."""
        started = self._clock()
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for loses a cancellation that lands as the awaited
            # call completes, and a stopping service would then wait on this loop forever.
            async with asyncio.timeout(self.renew_deadline_s):
                held = await self._acquire_or_renew()
        except _TRANSIENT as exc:
            log.warning("Lease %s: %s", self.lease, exc or type(exc).__name__)
            held = None
        if held:
            self._lapses_at = started + self.renew_deadline_s
        elif held is False:
            self._lapses_at = None
        self.attempted.set()
        return self._announce()

    async def wait_until(self, leading: bool) -> None:
        """Return once `is_leader() == leading`. A lapsed renew deadline is noticed when it passes, without
        waiting for a try, so the work of a holder cut off from the API server stops in time."""
        while self._announce() != leading:
            changed = self._changed
            deadline = None  # leadership begins only with a try, which announces it; it may end by the clock
            if not leading and self._lapses_at is not None:
                left = self._lapses_at - self._clock()
                deadline = asyncio.get_running_loop().time() + left
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(deadline):
                    await changed.wait()

    async def until_lost(self, work: Awaitable[T]) -> asyncio.Future[T]:
        """Await `work`, cancelled as soon as this replica does not lead (at once if it does not now); the
        finished future tells how it ended."""
        task = asyncio.ensure_future(work)
        lost = asyncio.ensure_future(self.wait_until(leading=False))
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            task.cancel()
            await asyncio.gather(task, lost, return_exceptions=True)
        return task

    async def while_leading(self, work: Callable[[], Awaitable[None]]) -> None:
        """Forever: each time this replica becomes leader run `work()`, and cancel it as soon as it is not.
        `work` should run until cancelled; one that ends early is started again after `retry_s`."""
        while True:
            await self.wait_until(leading=True)
            ended = await self.until_lost(work())
            if not ended.cancelled():
                if (error := ended.exception()) is not None:
                    log.error("work under Lease %s failed", self.lease, exc_info=error)
                await asyncio.sleep(self.retry_s)

    async def release(self) -> None:
        """Give the Lease up if this replica holds it. Call once the work it guarded has stopped and
        `run_forever` is no longer running, so nothing renews it again."""
        if not self.is_leader():
            return
        self._lapses_at = None
        self._announce()
        try:
            async with asyncio.timeout(self.renew_deadline_s):
                await self._give_up()
        except _TRANSIENT as exc:
            log.warning("Lease %s not released (%s); another replica takes over once it expires", self.lease, exc)

    # -- one try ---------------------------------------------------------------------------------------------

    async def _acquire_or_renew(self) -> bool | None:
        """True: this replica holds the Lease now; False: another one does; None: unknown (a race was lost)."""
        now = time.time()
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except NotFound:
            return await self._create(now)
        current = lease.get("spec") or {}
        self._observe(current)
        holder = current.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(current):
            return False
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration_s,
                "renewTime": rfc3339_micro(now)}
        if holder != self.identity:
            spec["acquireTime"] = rfc3339_micro(now)
            spec["leaseTransitions"] = int(current.get("leaseTransitions") or 0) + 1
        lease["spec"] = {**current, **spec}
        try:
            written = await self.client.replace(LEASES, lease, self.namespace)
        except Conflict:
            return None
        if holder != self.identity:
            log.info("Lease %s acquired by %s%s", self.lease, self.identity, f" from {holder}" if holder else "")
        self._observe(written.get("spec") or lease["spec"])
        return True

    async def _create(self, now: float) -> bool | None:
        body: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration_s,
                     "acquireTime": rfc3339_micro(now), "renewTime": rfc3339_micro(now), "leaseTransitions": 0},
        }
        try:
            written = await self.client.create(LEASES, body, self.namespace)
        except Conflict:  # another candidate created it first
            return None
        log.info("Lease %s created by %s", self.lease, self.identity)
        self._observe(written.get("spec") or body["spec"])
        return True

    async def _give_up(self) -> None:
        lease = await self.client.get(LEASES, self.name, self.namespace)
        current = lease.get("spec") or {}
        if current.get("holderIdentity") != self.identity:
            return
        now = rfc3339_micro(time.time())
        # client-go's release: no holder, and a one-second duration for candidates that read it that way.
        lease["spec"] = {**current, "holderIdentity": "", "leaseDurationSeconds": 1,
                         "acquireTime": now, "renewTime": now}
        await self.client.replace(LEASES, lease, self.namespace)
        log.info("Lease %s released by %s", self.lease, self.identity)

    def _observe(self, spec: dict[str, Any]) -> None:
        record = tuple(spec.get(k) for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime",
                                             "renewTime", "leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()

    def _expired(self, spec: dict[str, Any]) -> bool:
        duration = float(spec.get("leaseDurationSeconds") or self.duration_s)
        return self._clock() >= self._observed_at + duration

    def _announce(self) -> bool:
        """Current leadership; a change since the last call is logged and wakes `wait_until`."""
        leading = self.is_leader()
        if leading != self._announced:
            self._announced = leading
            log.info("Lease %s: %s %s", self.lease, self.identity, "leads" if leading else "no longer leads")
            self._changed.set()
            self._changed = asyncio.Event()
        return leading


class LeaderGauge:
    """`lapilli_leader{lease, identity}`: 1 while this replica holds the Lease, else 0. One per registry; every
    elector of the process is tracked on it, and `identity` is what the Lease's `holderIdentity` names."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._gauge = Gauge(
            "lapilli_leader", "1 while this replica holds the Lease (namespace/name), else 0.",
            ["lease", "identity"], registry=registry,
        )

    def track(self, elector: LeaseElector) -> None:
        self._gauge.labels(elector.lease, elector.identity).set_function(lambda: float(elector.is_leader()))
