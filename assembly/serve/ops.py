"""Operational endpoints on the serving app: `/healthz` (the process answers), `/readyz` (every component is
ready; 503 with the laggards otherwise), `/metrics` (Prometheus text or OpenMetrics, as the scraper asks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from assembly.serve.component import Component


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
