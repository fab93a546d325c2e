"""Component: the admission webhook over TLS, with the certificate reloader and the caBundle keeper."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from assembly.serve.settings import WebhookSettings
from webhook.context import AdmissionContext
from webhook.metrics import WebhookMetrics
from webhook.server import make_app
from webhook.tls import CertReloader, server_context

log = logging.getLogger("lapilli.serve")

Background = Callable[[], Coroutine[Any, Any, None]]
"""A loop started with the server and cancelled with it (the caBundle keeper)."""


class WebhookServer:
    name = "webhook"

    def __init__(
        self,
        settings: WebhookSettings,
        context: AdmissionContext,
        registry: CollectorRegistry,
        *,
        extra_routes: Callable[[web.Application], None] = lambda _app: None,
        background: tuple[Background, ...] = (),
    ) -> None:
        self.settings = settings
        self.context = context
        self.metrics = WebhookMetrics(registry)
        self.tls_reloads = Counter(
            "lapilli_tls_reloads_total",
            "Checks that found new certificate files, by result.",
            ["result"],
            registry=registry,
        )
        self._extra_routes = extra_routes
        self._background = background
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.port = 0

    async def start(self) -> None:
        s = self.settings
        tls = server_context(s.tls_cert_file, s.tls_key_file)
        reloader = CertReloader(
            tls,
            s.tls_cert_file,
            s.tls_key_file,
            interval=s.tls_reload_interval_s,
            on_result=lambda result: self.tls_reloads.labels(result).inc(),
        )
        app = make_app(self.context, self.metrics)
        self._extra_routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, s.host, s.port, ssl_context=tls, reuse_address=True)
        await site.start()
        self.port = self._bound_port()
        self._tasks.append(asyncio.create_task(reloader.run(), name="tls-reloader"))
        for start in self._background:
            self._tasks.append(asyncio.create_task(start()))
        log.info("webhook serving TLS on %s:%d", s.host, self.port)

    def _bound_port(self) -> int:
        assert self._runner is not None
        for address in self._runner.addresses:
            if isinstance(address, tuple) and len(address) >= 2:
                return int(address[1])
        return self.settings.port

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def ready(self) -> bool:
        return self._runner is not None
