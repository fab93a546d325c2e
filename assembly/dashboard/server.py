"""`lapilli dashboard`: a local web view on 127.0.0.1, reading the cluster with the user's own kubeconfig (so it shows
what their RBAC allows, and needs nothing new in the cluster). List-then-watch reflectors keep the scheduler's
inputs current; each request renders from them (`/` the whole page, `/fragment` the live part).

A request whose Host is not the loopback address and port the page is served on is refused (421): a web page the
browser loaded from elsewhere could otherwise reach this port through a DNS name rebound to 127.0.0.1, and read
the cluster with the user's credentials."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from assembly.dashboard.forecast import Forecaster
from assembly.dashboard.page import build
from assembly.dashboard.render import SECURITY_HEADERS, document, fragment
from assembly.dashboard.timeline import HistoryFeed, timeline
from assembly.why.gather import (
    QUEUE_EVENTS_SCOPE,
    SCHEDULER_INPUTS,
    ClusterConf,
    Unreadable,
    build_view,
    fallback,
    read_conf,
    read_device_config,
    read_queue_events,
    refused,
)
from extender.engine.explain.closers import closed_by
from lapilli.cluster import Reflector
from lapilli.kube import KubeClient
from lapilli.kube.errors import ApiError, NotFound
from lapilli.kube.resources import EVENTS, VC_JOBS
from lapilli.resources.units import GPU

log = logging.getLogger("lapilli.dashboard")


class DashboardError(Exception):
    """The dashboard cannot be served (its port is taken); the message is the one line the command prints."""


CLIENT: web.AppKey[KubeClient] = web.AppKey("client", KubeClient)
RENDER: web.AppKey[Callable[[bool], str]] = web.AppKey("render", Callable[[bool], str])  # type: ignore[arg-type]


class Dashboard:
    def __init__(self, client: KubeClient, conf_path: Path | None, namespace: str | None = None,
                 prometheus_url: str | None = None) -> None:
        """`namespace`: the user's own (the kubeconfig context's, or `--namespace`), where a kind they may not
        read across namespaces is read instead, as `lapilli job why` does; `prometheus_url`: where the queues' last
        day is read (else the service's own history)."""
        self.client, self.conf_path, self.namespace = client, conf_path, namespace
        self.history = HistoryFeed(client, prometheus_url)
        self.reflectors = [Reflector(client, res) for res in SCHEDULER_INPUTS]
        self.events = Reflector(client, EVENTS, namespace="default", field_selector="involvedObject.kind=Queue")
        # Volcano Jobs, finished ones too: the waiting jobs' expected start (assembly.why.estimate).
        self.jobs = Reflector(client, VC_JOBS)
        self.conf: ClusterConf | None = None
        self.device_config: list[dict[str, Any]] = []  # the vGPU device config the conf names, read at start
        self.narrowed: list[Unreadable] = []  # kinds refused across namespaces and watched in `namespace` only
        self.forecaster = Forecaster()  # the waiting jobs' expected starts, replayed off the refresh

    async def start(self, sync_timeout_s: float = 30.0) -> None:
        self.conf = await read_conf(self.client, self.conf_path)
        self.device_config = await read_device_config(self.client, self.conf.conf)
        for reflector in [*self.reflectors, self.events, self.jobs]:
            reflector.start()
        await self._listed(sync_timeout_s)
        for i, reflector in enumerate(self.reflectors):
            self.reflectors[i] = await self._narrowed(reflector)
        self.jobs = await self._narrowed(self.jobs)
        if self.narrowed:
            await self._listed(sync_timeout_s)
        await self.history.start()

    async def _narrowed(self, reflector: Reflector) -> Reflector:
        """A watch refused across namespaces is replaced by one in the user's namespace (the gap is recorded)."""
        if reflector.error is None or reflector.synced.is_set():
            return reflector
        where, gap = fallback(reflector.resource, reflector.error, self.namespace)
        if where is None:
            return reflector
        await reflector.stop()
        narrowed = Reflector(self.client, reflector.resource, namespace=where)
        narrowed.start()
        self.narrowed.append(gap)
        return narrowed

    async def _listed(self, timeout_s: float) -> None:
        """Until each input is listed or refused: a kind the user may not read is shown as missing, not waited
        for."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while not all(r.synced.is_set() or r.error is not None for r in [*self.reflectors, self.jobs]):
                    await asyncio.sleep(0.1)

    def unreadable(self) -> list[Unreadable]:
        """What the reflectors are refused (the RBAC gaps), and the conf's ConfigMap if it was. A kind the cluster
        does not serve (404: HyperNodes without their CRD) is no gap: none of it exists."""
        gaps = [*self.narrowed, *(refused(r.resource, r.error, r.namespace) for r in self.reflectors
                                  if r.error is not None and not isinstance(r.error, NotFound))]
        if self.events.error is not None:
            gaps.append(Unreadable.of("Event", QUEUE_EVENTS_SCOPE, self.events.error))
        if self.jobs.error is not None:  # only the expected starts go
            gaps.append(refused(VC_JOBS, self.jobs.error, self.jobs.namespace))
        return [*gaps, *([self.conf.unreadable] if self.conf and self.conf.unreadable else [])]

    async def stop(self) -> None:
        for reflector in [*self.reflectors, self.events, self.jobs]:
            await reflector.stop()
        await self.history.stop()

    def render(self, whole: bool) -> str:
        assert self.conf is not None
        view = build_view({**{r.resource.kind: list(r.store.values()) for r in self.reflectors},
                           "ConfigMap": self.device_config})
        closers = closed_by(view.objects.get("Queue", {}).values(), self.events.store.values())
        now = datetime.now(UTC)
        jobs = list(self.jobs.store.values())
        # The replay reads the scheduler's inputs and the Jobs: it is due again when one of their watches moved.
        inputs = tuple((r.name, r.namespace, r.resource_version) for r in [*self.reflectors, self.jobs])
        forecast = self.forecaster.current(inputs, view.objects, jobs, self.conf.conf)
        page = build(view, self.conf.conf, self.conf.where, closers, now, unreadable=self.unreadable(), jobs=jobs,
                     forecast=forecast)
        if forecast is not None and forecast.key != inputs:
            page.estimated_at = datetime.fromtimestamp(forecast.at, UTC).strftime("%H:%M:%S UTC")
        live = {q.name: (b.allocated, b.deserved) for q in page.queues for b in q.bars if b.resource == GPU}
        page.timeline = timeline(self.history, view, now, live)
        return document(page) if whole else fragment(page)


def loopback_host(host: str | None, port: int) -> bool:
    """The Host header names the address the dashboard listens on (127.0.0.1 or localhost, with its port)."""
    return host in (f"127.0.0.1:{port}", f"localhost:{port}")


def make_app(dashboard: Dashboard, port: Callable[[], int]) -> web.Application:
    """`port`: the port the page is served on (known once the socket is bound)."""

    @web.middleware
    async def same_host(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
                        ) -> web.StreamResponse:
        if not loopback_host(request.headers.get("Host"), port()):
            response: web.StreamResponse = web.Response(
                status=421, text="this dashboard answers only http://127.0.0.1:PORT/\n")
        else:
            response = await handler(request)
        # Every answer: the page runs only its own script, loads nothing else, is never framed or sniffed.
        response.headers.update(SECURITY_HEADERS)
        return response

    async def index(request: web.Request) -> web.Response:
        text = await asyncio.to_thread(dashboard.render, True)
        return web.Response(text=text, content_type="text/html")

    async def live(request: web.Request) -> web.Response:
        text = await asyncio.to_thread(dashboard.render, False)
        return web.Response(text=text, content_type="text/html")

    app = web.Application(middlewares=[same_host])
    app.router.add_get("/", index)
    app.router.add_get("/fragment", live)
    return app


async def serve(client: KubeClient, port: int, conf_path: Path | None, ready: Callable[[int], None],
                stop: asyncio.Event, namespace: str | None = None, prometheus_url: str | None = None) -> None:
    """Serve until `stop` is set; `ready(port)` once the page answers (port 0 picks a free one)."""
    dashboard = Dashboard(client, conf_path, namespace, prometheus_url)
    await dashboard.start()
    bound = port
    runner = web.AppRunner(make_app(dashboard, lambda: bound), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    try:
        try:
            await site.start()
        except OSError as exc:
            raise DashboardError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        sockets = getattr(site._server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        ready(bound)
        await stop.wait()
    finally:
        await runner.cleanup()
        await dashboard.stop()


__all__ = ["ApiError", "Dashboard", "DashboardError", "make_app", "read_queue_events", "serve"]
