"""The extender as one component of `lapilli serve`: cluster state, session loop, Lease, permit cache, HTTP."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import ssl
import time
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry

from extender.engine.plugins.deviceshare import vgpu_arguments
from extender.engine.snapshot import Snapshot
from extender.service.core import Extender
from extender.service.history import HistoryLoop
from extender.service.http import make_app
from extender.service.idle.loop import IdleLoop
from extender.service.loop import ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.parking import holds_room
from extender.service.permit import PermitCache
from extender.service.plan import Plan
from extender.service.runner import ProcessRunner
from extender.service.settings import ExtenderSettings
from extender.service.state import ClusterState
from extender.service.usage import UsageLoop, UsageMetrics
from extender.service.why import WhyLoop
from lapilli.cluster import Shared
from lapilli.cluster.leader import LeaseElector
from lapilli.kube import KubeClient
from lapilli.tasks import cancel_and_wait

log = logging.getLogger("lapilli.extender")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class ExtenderComponent:
    name = "extender"

    def __init__(
        self, settings: ExtenderSettings, client: KubeClient, registry: CollectorRegistry,
        elector: LeaseElector | None = None, kubeconfig: Path | None = None, shared: Shared | None = None,
    ) -> None:
        """`elector`: the extender's Lease (None: this replica answers the verbs unconditionally); `kubeconfig`:
        what the session process reaches the API server with (None: as `load_config` finds it); `shared`: the
        process's reflectors, when other owners in it (the controllers, the admission caches) read the same kinds."""
        self.settings = settings
        self.elector = elector
        # The cluster is read through `client`; binds, evictions, status and events are written through a client
        # fenced by the Lease, so a replica past its renew deadline cannot write on from a verb or session that
        # started while it led.
        writer = client if elector is None else elector.fence(client, "the extender's")
        conf = ConfSource(settings.scheduler_conf, on_error=lambda _error: self.metrics.conf_reload_errors.inc())
        # The vGPU device config the start conf names is followed (a conf reloaded with another one needs a restart).
        vgpu = vgpu_arguments(conf.conf)
        device_configs = [vgpu.config_key] if vgpu is not None else []
        self.state = ClusterState(client, on_change=self._changed, on_pod_settled=self._settled,
                                  device_configs=device_configs, scheduler_names=settings.scheduler_names,
                                  shared=shared)
        self.plan = Plan(ttl_s=settings.permit_timeout_s * 2)
        self.metrics = ExtenderMetrics(registry, parked=lambda: self.permit.parked_count(),
                                       restarts=self.state.restarts,
                                       releasing=lambda: self.permit.releasing())
        self.metrics.conf_stale.set_function(lambda: float(bool(conf.error)))
        self.loop = SessionLoop(
            self.state, self.plan, writer, conf, self.metrics,
            period_s=settings.session_period_s, is_leader=self.is_leader,
        )
        self.permit = PermitCache(self._bind_now, settings.permit_timeout_s, on_timeout=self._timed_out,
                                  on_release=lambda _gang: self.metrics.gang_releases.inc())
        self.extender = Extender(self.state, self.plan, self.loop, self.permit, writer, self.metrics,
                                 scheduler_names=settings.scheduler_names)
        # Off, it only turns idle conditions left from an earlier run False once, and hands the engine nothing.
        self.idle = IdleLoop(settings.idle_gpu, lambda: self.state.copy() if self.state.synced else None,
                             lambda: self.state.store("PodGroup"), writer, registry, is_leader=self.is_leader)
        if settings.idle_gpu.active:
            self.loop.idle = lambda: self.idle.reclaimable
            self.loop.evicted = self.idle.evicted
        self.history = HistoryLoop(lambda: self.loop.latest, writer, interval_s=settings.history_interval_s or 1.0,
                                   is_leader=self.is_leader)
        if settings.history_interval_s > 0:
            self.loop.on_running = self.history.started
        self.why = WhyLoop(self._snapshot, lambda: self.loop.conf.conf,
                           lambda: self.state.store("PodGroup"), writer, queues=lambda: self.state.store("Queue"),
                           interval_s=settings.why_interval_s or 1.0, is_leader=self.is_leader)
        self.usage = UsageLoop(lambda: self.state.copy() if self.state.synced else None, lambda: self.loop.conf.conf,
                               writer, UsageMetrics(registry), is_leader=self.is_leader)
        self.runner = (ProcessRunner(kubeconfig, device_configs=device_configs,
                                     scheduler_names=settings.scheduler_names)
                       if settings.session_process else None)
        if self.runner is not None:
            self.loop.runner = self.runner
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None
        # TLS on the extender port (client certificates verified with a client CA); the assembly keeps its
        # serving pair in step with the files.
        self.tls: ssl.SSLContext | None = settings.tls_context()

    def _snapshot(self) -> Snapshot | None:
        """A copy of the cluster as the sessions see it (idle-reclaimable pods included), None while not synced."""
        if not self.state.synced:
            return None
        snap = self.state.copy()
        snap.idle_reclaimable = self.loop.idle()
        return snap

    def _settled(self, pod_key: str) -> None:
        """The watch says the API server now decides where the pod is: bound (assumed a while longer for the
        sessions, `Plan.forget_pod`), or ended or gone."""
        pod = self.state.snapshot.pods.get(pod_key)
        self.plan.forget_pod(pod_key, pod.node_name if pod is not None and holds_room(pod) else None, time.monotonic())

    def _changed(self) -> None:
        self.loop.poke()
        if self.permit.parked_count():
            self.permit.recheck(self.state.bound_members)

    async def _bind_now(self, namespace: str, name: str, node: str, uid: str) -> str:
        return await self.extender.bind_now(namespace, name, node, uid)

    def _timed_out(self, gang: str, gathered: int, needed: int) -> None:
        """The gang's parked members were refused together; its plan goes, and every member not yet bound waits for
        the next one. kube-scheduler sets the refused members aside until they change (or its 60 s flush), and the
        members that never reached bind may sit there too: touched together once replanned, they come back
        together, instead of each on its own flush, where they kept missing each other's permit window."""
        self.metrics.permit_timeouts.inc()
        self.plan.drop(gang)
        self.loop.wait_for_plan(gang)
        self.loop.poke()

    def is_leader(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    async def start(self) -> None:
        if self.runner is not None:
            self.runner.start()
        await self.state.start()
        # Listening before the caches sync: kube-scheduler's filter calls are held until this replica can plan
        # (`http.HOLD_S`) instead of refused at connect, which would set each pod aside with a back-off.
        await self._listen()
        if not await self.state.wait_synced(self.settings.sync_timeout_s):
            log.warning("extender caches not synced after %.0fs; filter answers with an error until they are",
                        self.settings.sync_timeout_s)
        # The listed cluster is long-lived: keep it out of every later full collection, whose pauses would
        # otherwise land on the verbs.
        gc.freeze()
        if self.elector is not None:
            self._tasks.append(asyncio.create_task(self.elector.run_forever(), name="lease"))
        self._tasks.append(asyncio.create_task(self.loop.run_forever(), name="session-loop"))
        if self.settings.why_interval_s > 0:
            self._tasks.append(asyncio.create_task(self.why.run_forever(), name="why"))
        self._tasks.append(asyncio.create_task(self.usage.run_forever(), name="usage"))
        self._tasks.append(asyncio.create_task(self.idle.run_forever(), name="idle-gpu"))
        if self.settings.history_interval_s > 0:
            self._tasks.append(asyncio.create_task(self.history.run_forever(), name="history"))

    async def _listen(self) -> None:
        app = make_app(self.extender, self.is_leader, self.answering)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        host, tls = self.settings.host, self.tls
        site = web.TCPSite(self._runner, host, self.settings.port, ssl_context=tls)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.settings.port
        clients = "verified client certificates" if tls is not None and tls.verify_mode == ssl.CERT_REQUIRED else (
            "any client")
        log.info("extender listening on %s:%s (%s, %s)", host, self.bound_port, "HTTP" if tls is None else "TLS",
                 clients)
        if tls is None and not _loopback(host):
            log.warning("the extender port %s:%s is plain HTTP off loopback: anything that reaches it may ask for "
                        "filter answers and binds (each bind is still checked against the cluster); give it "
                        "--extender-tls-cert-file/--extender-tls-key-file/--extender-client-ca-file",
                        host, self.bound_port)

    async def stop(self) -> None:
        self.permit.cancel_all("lapilli extender is stopping; nothing was bound")
        await cancel_and_wait(*self._tasks)
        if self._runner is not None:
            await self._runner.cleanup()
        if self.runner is not None:
            self.runner.stop()
        if self.elector is not None:  # nothing answers or schedules any more: the next replica may lead now
            await self.elector.release()
        await self.state.stop()

    def ready(self) -> bool:
        """The service's readiness: a replica that does not hold the Lease is ready too, since it serves the
        webhook; kube-scheduler's calls to it get a 503 and are retried. Not ready while sessions keep failing."""
        return self.state.synced and self.loop.healthy()

    def answering(self) -> bool:
        """The extender port's /readyz: this replica answers the verbs (and its sessions are not failing)."""
        return self.state.synced and self.is_leader() and self.loop.healthy()
