"""The webhook's serving certificate kept in a Secret by the service itself: no manual certificate step.

At start, before the webhook listens, the service reads Secret `namespace/name` (`kubernetes.io/tls`, with the
CA in `ca.crt`/`ca.key` beside `tls.crt`/`tls.key`). If there is none it makes a CA and a serving certificate
for the webhook's Service (`webhook.certs`) and creates the Secret; when two replicas start together one
create wins (409 for the other, which reads the winner's). A serving certificate that expires within
`renew_before` or lacks one of the Service's names is re-issued by the same CA (so `caBundle` stays valid) and
written back with the Secret's resourceVersion (a conflict means another replica renewed first). The pair is
written to the files the webhook serves from (an emptyDir: the root filesystem is read-only), the CA to the file
`CaBundleSync` keeps the webhook configurations' `caBundle` equal to; the existing reloader then serves a new
pair without a restart. `run()` repeats this every `interval_s`, so every replica follows a renewal.

RBAC: `get`/`update` on this one Secret (resourceNames) and `create` in the namespace — no Secret list.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography import x509

from lapilli.kube import REQUEST_ERRORS, KubeClient, NotFound
from lapilli.kube.errors import AlreadyExists, Conflict
from lapilli.kube.resources import SECRETS
from webhook.certs import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, _write_atomic, generate, service_hosts

log = logging.getLogger("lapilli.serve")

RENEW_BEFORE: Final = dt.timedelta(days=30)


@dataclass(frozen=True, slots=True)
class SecretRef:
    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str) -> SecretRef:
        """`namespace/name`; ValueError with the reason otherwise."""
        namespace, sep, name = text.partition("/")
        if not (sep and namespace and name) or "/" in name:
            raise ValueError(f"{text!r} is not namespace/name")
        return cls(namespace, name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def _pem(secret: dict[str, Any], key: str) -> bytes | None:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value) if isinstance(value, str) else None


def needs_new_leaf(cert_pem: bytes, hosts: list[str], now: dt.datetime, renew_before: dt.timedelta) -> str | None:
    """Why the serving certificate must be re-issued (None: it is good)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound) as exc:
        return f"unreadable certificate ({exc})"
    if cert.not_valid_after_utc - now < renew_before:
        return f"it expires {cert.not_valid_after_utc:%Y-%m-%d}"
    have = {str(v) for v in names.get_values_for_type(x509.DNSName)}
    have |= {str(v) for v in names.get_values_for_type(x509.IPAddress)}
    if missing := [h for h in hosts if h not in have]:
        return f"it does not name {', '.join(missing)}"
    return None


class ServingCertSecret:
    def __init__(
        self, client: KubeClient, secret: SecretRef, service: str, *, cert_file: Path, key_file: Path,
        ca_file: Path | None, renew_before: dt.timedelta = RENEW_BEFORE, interval_s: float = 600.0,
    ) -> None:
        self.client, self.secret, self.interval_s = client, secret, interval_s
        self.hosts = service_hosts(service, secret.namespace)
        self.cert_file, self.key_file, self.ca_file = cert_file, key_file, ca_file
        self.renew_before = renew_before

    def _body(self, files: dict[str, bytes], current: dict[str, Any] | None) -> dict[str, Any]:
        data = {k: base64.b64encode(v).decode("ascii") for k, v in files.items()}
        meta: dict[str, Any] = {"name": self.secret.name, "namespace": self.secret.namespace,
                                "labels": {"app.kubernetes.io/name": "lapilli"}}
        if current is not None:
            meta = {**current["metadata"], **meta}
        return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta, "data": data}

    async def _current(self) -> dict[str, Any]:
        """The Secret, made (or renewed) here when it is missing or its certificate will not do."""
        try:
            secret = await self.client.get(SECRETS, self.secret.name, self.secret.namespace)
        except NotFound:
            bundle = generate(self.hosts)
            files = {CA_CERT: bundle.ca_cert, CA_KEY: bundle.ca_key, TLS_CERT: bundle.cert, TLS_KEY: bundle.key}
            try:
                created = await self.client.create(SECRETS, self._body(files, None), self.secret.namespace)
            except AlreadyExists:  # another replica made it first: serve the same certificate as it does
                return await self.client.get(SECRETS, self.secret.name, self.secret.namespace)
            log.info("serving certificate made for %s and kept in Secret %s", self.hosts[2], self.secret)
            return created
        pems = {k: _pem(secret, k) for k in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)}
        if any(v is None for v in pems.values()):
            raise ValueError(f"Secret {self.secret} lacks one of ca.crt, ca.key, tls.crt, tls.key")
        files = {k: v for k, v in pems.items() if v is not None}
        why = needs_new_leaf(files[TLS_CERT], self.hosts, dt.datetime.now(dt.UTC), self.renew_before)
        if why is None:
            return secret
        bundle = generate(self.hosts, ca=(files[CA_CERT], files[CA_KEY]))
        files |= {TLS_CERT: bundle.cert, TLS_KEY: bundle.key}
        try:
            renewed = await self.client.replace(SECRETS, self._body(files, secret), self.secret.namespace)
        except Conflict:  # another replica renewed it: take its pair
            return await self.client.get(SECRETS, self.secret.name, self.secret.namespace)
        log.info("serving certificate in Secret %s re-issued: %s", self.secret, why)
        return renewed

    async def ensure(self) -> None:
        """The Secret exists with a good certificate, and the files hold it."""
        secret = await self._current()
        writes = [(self.key_file, TLS_KEY, 0o600), (self.cert_file, TLS_CERT, 0o644)]  # key before its cert
        if self.ca_file is not None:
            writes.append((self.ca_file, CA_CERT, 0o644))
        for path, key, mode in writes:
            pem = _pem(secret, key)
            assert pem is not None
            if not path.is_file() or path.read_bytes() != pem:
                path.parent.mkdir(parents=True, exist_ok=True)
                _write_atomic(path, pem, mode)

    async def ensure_until_done(self, retry_s: float = 2.0) -> None:
        """`ensure()`, retried while the API server cannot be reached or refuses (the webhook cannot start
        without a certificate)."""
        while True:
            try:
                await self.ensure()
                return
            except REQUEST_ERRORS as exc:
                log.warning("serving certificate from Secret %s: %s; retrying", self.secret, exc)
            await asyncio.sleep(retry_s)

    async def run(self) -> None:
        """Until cancelled: follow the Secret (a renewal by any replica) and renew before expiry."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.ensure()
            except (*REQUEST_ERRORS, ValueError) as exc:
                log.warning("serving certificate from Secret %s: %s", self.secret, exc)
