"""TLS for the admission server: one live `SSLContext`, reloaded in place when the certificate files change.

The reloader polls the files (a content hash, so Kubernetes' atomic symlink swap in Secret volumes is seen
like any rewrite). On a change it snapshots both files into a private temp directory, loads the pair into a
scratch context first — a half-rotated or mismatched pair is refused there and the live context keeps serving
the old certificate — and then calls `load_cert_chain` on the live context: new handshakes get the new
certificate, open connections keep theirs, nothing restarts. Counterpart: kopf's file-hash reload, minus its
site restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("lapilli.tls")


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A TLS ≥ 1.2 server context holding the pair (raises `ssl.SSLError`/`OSError` on a bad pair)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])  # aiohttp speaks HTTP/1.1; the apiserver's client falls back to it
    context.load_cert_chain(cert_file, key_file)
    return context


class CertReloader:
    """Keeps `context` serving the pair currently in `cert_file`/`key_file`."""

    def __init__(
        self,
        context: ssl.SSLContext,
        cert_file: Path,
        key_file: Path,
        *,
        interval: float = 10.0,
        on_result: Callable[[str], None] | None = None,
    ) -> None:
        self.context = context
        self.cert_file = cert_file
        self.key_file = key_file
        self.interval = interval
        self._on_result = on_result or (lambda _result: None)
        self._loaded = self._digest(*self._read())

    def _read(self) -> tuple[bytes, bytes]:
        return self.cert_file.read_bytes(), self.key_file.read_bytes()

    @staticmethod
    def _digest(cert: bytes, key: bytes) -> bytes:
        return hashlib.sha256(cert + b"\0" + key).digest()

    def check(self) -> bool:
        """Reload if the files changed and hold a valid pair; True when the live context now serves new files."""
        try:
            cert, key = self._read()
        except OSError as exc:
            log.warning("cannot read TLS files: %s", exc)
            self._on_result("unreadable")
            return False
        digest = self._digest(cert, key)
        if digest == self._loaded:
            return False
        with tempfile.TemporaryDirectory(prefix="lapilli-tls-") as scratch:
            cert_copy, key_copy = Path(scratch, "tls.crt"), Path(scratch, "tls.key")
            cert_copy.write_bytes(cert)
            key_copy.touch(mode=0o600)
            key_copy.write_bytes(key)
            try:
                server_context(cert_copy, key_copy)
            except (ssl.SSLError, OSError, ValueError) as exc:
                # Mid-rotation (new cert, old key) or garbage: keep serving the old pair, retry next tick.
                log.warning("new TLS files not loaded (%s); still serving the previous certificate", exc)
                self._on_result("invalid")
                return False
            self.context.load_cert_chain(cert_copy, key_copy)
        self._loaded = digest
        log.info("reloaded TLS certificate from %s", self.cert_file)
        self._on_result("reloaded")
        return True

    async def run(self) -> None:
        """Poll until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            self.check()
