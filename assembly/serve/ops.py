"""Operational endpoints on the serving app: `/healthz` (the process answers), `/readyz` (every component is
ready; 503 with the laggards otherwise), `/metrics` (Prometheus text or OpenMetrics, as the scraper asks)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from assembly.serve.component import Component

log = logging.getLogger("lapilli.serve")


class Ops:
    def __init__(self, registry: CollectorRegistry, components: Callable[[], Sequence[Component]]) -> None:
        self.registry = registry
        self._components = components

    async def healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(self, _request: web.Request) -> web.Response:
        waiting = [c.name for c in self._components() if not c.ready()]
        if waiting:
            body = orjson.dumps({"ready": False, "waiting": waiting})
            return web.Response(body=body, status=503, content_type="application/json")
        return web.Response(text="ok")

    async def metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        response = web.Response(body=encoder(self.registry))
        response.headers["Content-Type"] = content_type  # content_type= with a charset raises in aiohttp
        return response

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics)


class OpsServer:
    """The operational endpoints on a plain-HTTP port of their own, for a process without the webhook (the
    extender beside kube-scheduler): probes and Prometheus reach them there."""

    name = "ops"

    def __init__(self, ops: Ops, host: str, port: int) -> None:
        self.ops, self.host, self.port = ops, host, port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        self.ops.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port, reuse_address=True).start()
        for address in self._runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                self.port = int(address[1])
        log.info("/healthz, /readyz and /metrics on http://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def ready(self) -> bool:
        return self._runner is not None
