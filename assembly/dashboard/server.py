"""`lapilli dashboard`: a local web view on 127.0.0.1, reading the cluster with the user's own kubeconfig (so it shows
what their RBAC allows, and needs nothing new in the cluster). List-then-watch reflectors keep the scheduler's
inputs current; each request renders from them (`/` the whole page, `/fragment` the live part)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from assembly.dashboard.page import build
from assembly.dashboard.render import document, fragment
from assembly.why.gather import SCHEDULER_INPUTS, ConfSource, build_view, closed_by, read_conf, read_queue_events
from lapilli.cluster import Reflector
from lapilli.kube import KubeClient
from lapilli.kube.errors import ApiError
from lapilli.kube.resources import EVENTS

log = logging.getLogger("lapilli.dashboard")

CLIENT: web.AppKey[KubeClient] = web.AppKey("client", KubeClient)
RENDER: web.AppKey[Callable[[bool], str]] = web.AppKey("render", Callable[[bool], str])  # type: ignore[arg-type]


class Dashboard:
    def __init__(self, client: KubeClient, conf_path: Path | None) -> None:
        self.client, self.conf_path = client, conf_path
        self.reflectors = [Reflector(client, res) for res in SCHEDULER_INPUTS]
        self.events = Reflector(client, EVENTS, namespace="default", field_selector="involvedObject.kind=Queue")
        self.conf: ConfSource | None = None

    async def start(self, sync_timeout_s: float = 30.0) -> None:
        self.conf = await read_conf(self.client, self.conf_path)
        for reflector in [*self.reflectors, self.events]:
            reflector.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(sync_timeout_s):
                await asyncio.gather(*(r.synced.wait() for r in self.reflectors))

    async def stop(self) -> None:
        for reflector in [*self.reflectors, self.events]:
            await reflector.stop()

    def render(self, whole: bool) -> str:
        assert self.conf is not None
        view = build_view({r.resource.kind: list(r.store.values()) for r in self.reflectors})
        closers = closed_by(view.objects.get("Queue", {}).values(), self.events.store.values())
        page = build(view, self.conf.conf, self.conf.where, closers)
        return document(page) if whole else fragment(page)


def make_app(dashboard: Dashboard) -> web.Application:
    async def index(request: web.Request) -> web.Response:
        text = await asyncio.to_thread(dashboard.render, True)
        return web.Response(text=text, content_type="text/html")

    async def live(request: web.Request) -> web.Response:
        text = await asyncio.to_thread(dashboard.render, False)
        return web.Response(text=text, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_get("/fragment", live)
    return app


async def serve(client: KubeClient, port: int, conf_path: Path | None, ready: Callable[[int], None],
                stop: asyncio.Event) -> None:
    """Serve until `stop` is set; `ready(port)` once the page answers (port 0 picks a free one)."""
    dashboard = Dashboard(client, conf_path)
    await dashboard.start()
    runner = web.AppRunner(make_app(dashboard), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    try:
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        ready(sockets[0].getsockname()[1] if sockets else port)
        await stop.wait()
    finally:
        await runner.cleanup()
        await dashboard.stop()


__all__ = ["ApiError", "Dashboard", "make_app", "read_queue_events", "serve"]
