"""Keeps the `caBundle` of Lapilli's webhook configurations equal to a CA file, like Volcano's webhook-manager
does at start — and again whenever the file changes (CA rotation: put old+new CAs in the file first)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

from lapilli.kube import ApiError, KubeClient, NotFound
from lapilli.kube.resources import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS, Resource
from webhook.configs import ca_bundle_patch

log = logging.getLogger("lapilli.serve")


class CaBundleSync:
    def __init__(self, client: KubeClient, ca_file: Path, names: Sequence[str], interval_s: float = 10.0) -> None:
        self.client = client
        self.ca_file = ca_file
        self.names = tuple(names)
        self.interval_s = interval_s
        self._applied: bytes | None = None

    async def _patch_one(self, resource: Resource, name: str, ca: bytes) -> bool:
        try:
            config = await self.client.get(resource, name)
        except NotFound:
            return False
        ops = ca_bundle_patch(config, ca)
        if ops:
            await self.client.patch(resource, name, ops, patch_type="json")
            log.info("patched caBundle of %s %s (%d webhooks)", resource.kind, name, len(ops))
        return True

    async def sync_once(self) -> bool:
        """Patch every named configuration that exists; True when all were found (and are now in step)."""
        ca = self.ca_file.read_bytes()
        found = 0
        for name in self.names:
            for resource in (MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS):
                found += await self._patch_one(resource, name, ca)
        return found >= len(self.names)

    async def run(self) -> None:
        """Until cancelled: re-sync when the CA file changes or a configuration was still missing."""
        while True:
            try:
                digest = hashlib.sha256(self.ca_file.read_bytes()).digest()
                if digest != self._applied and await self.sync_once():
                    self._applied = digest
            except (OSError, ApiError) as exc:
                log.warning("caBundle sync: %s", exc)
            await asyncio.sleep(self.interval_s)
