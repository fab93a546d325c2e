"""The extender port's certificate reload, as a component next to the extender (the webhook has its own).

The extender's TLS context is built from `ExtenderSettings` (`ExtenderSettings.tls_context`); this keeps its
serving pair equal to the files on disk, as the webhook's does, so a rotated certificate is served without a
restart. The client CA is read once at start: a new CA means a new kube-scheduler configuration anyway.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter

from lapilli.tasks import cancel_and_wait
from webhook.tls import CertReloader


class ExtenderCertReload:
    name = "extender-tls"

    def __init__(
        self, context: ssl.SSLContext, cert_file: Path, key_file: Path, registry: CollectorRegistry,
        interval_s: float,
    ) -> None:
        reloads = Counter(
            "lapilli_extender_tls_reloads_total", "Checks that found new extender certificate files, by result.",
            ["result"], registry=registry,
        )
        self.reloader = CertReloader(context, cert_file, key_file, interval=interval_s,
                                     on_result=lambda result: reloads.labels(result).inc())
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self.reloader.run(), name="extender-tls-reloader")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def ready(self) -> bool:
        return True
