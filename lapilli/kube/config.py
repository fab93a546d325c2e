"""Where the API server is and how to authenticate, as kubectl resolves it — through kubernetes_asyncio's loaders.

Kubeconfig files (`$KUBECONFIG` with its `:`-separated merge, `~/.kube/config`, or a path) and the in-cluster
service account are read by `kubernetes_asyncio.config`, so what users really have works: bearer tokens inline or
in a `tokenFile`, client certificates (files or `-data`), `exec` credential plugins (ExecCredential
`client.authentication.k8s.io/v1` and `v1beta1`, tokens or client certificates, re-run when they expire),
`auth-provider` OIDC (refreshed with its refresh token) and GCP, `proxy-url`, `tls-server-name`,
`insecure-skip-tls-verify`, and projected service-account tokens that rotate (re-read at least every minute).

Only the credentials come from the library: requests go through `lapilli.kube.client`'s raw-JSON client, which
asks `KubeConfig.authorization()` for its header (refreshed when due, or at once after a 401) and builds its TLS
context from `ssl_context()`.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import inspect
import os
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import yaml
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config.config_exception import ConfigException
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader
from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

SA_DIR: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount")
REFRESH_S = 60.0
"""Credentials are asked of their source again at least this often (token files rotate; an exec plugin's token
is kept until its `expirationTimestamp` by the library, so it runs only when that passed)."""


class ConfigError(Exception):
    """The kubeconfig or in-cluster environment does not describe a usable connection."""


class _Loaded(Protocol):
    """What a source fills in: kubernetes_asyncio's `Configuration` fields."""

    host: str
    ssl_ca_cert: str | None
    cert_file: str | None
    key_file: str | None
    verify_ssl: bool
    proxy: str | None
    tls_server_name: str | None
    api_key: dict[str, str]


class CredentialSource(Protocol):
    """A kubernetes_asyncio loader behind one connection."""

    async def load(self) -> _Loaded: ...

    def expired(self) -> bool:
        """Whether the credential last loaded says it has expired (an exec plugin's `expirationTimestamp`)."""
        ...


@dataclass(slots=True)
class _KubeconfigSource:
    loader: KubeConfigLoader
    where: str

    def expired(self) -> bool:
        expiry = getattr(self.loader, "exec_plugin_expiry", None)
        return isinstance(expiry, dt.datetime) and expiry <= dt.datetime.now(expiry.tzinfo or dt.UTC)

    async def load(self) -> _Loaded:
        configuration = Configuration()
        try:
            await self.loader.load_and_set(configuration)
        except (ConfigException, OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            raise ConfigError(f"kubeconfig {self.where}: {_one_line(exc)}") from exc
        return configuration  # type: ignore[return-value]


@dataclass(slots=True)
class _InClusterSource:
    loader: InClusterConfigLoader

    def expired(self) -> bool:
        return False

    async def load(self) -> _Loaded:
        configuration = Configuration()
        try:
            self.loader.load_and_set(configuration)
            # The loader re-reads the projected token once its minute is up; ask it now.
            # Typed as a coroutine by the library; in-cluster it is a plain function, elsewhere it may be async.
            hook = cast("Callable[[Configuration], object] | None", configuration.refresh_api_key_hook)
            if hook is not None:
                result = hook(configuration)
                if inspect.isawaitable(result):
                    await result
        except (ConfigException, OSError) as exc:
            raise ConfigError(f"in-cluster service account: {_one_line(exc)}") from exc
        return configuration  # type: ignore[return-value]


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


@dataclass(slots=True)
class KubeConfig:
    """One connection: server URL, TLS material and credentials. Built directly (static material) or by
    `load_kubeconfig`/`in_cluster_config`, whose `source` supplies (and refreshes) the rest on first use."""

    server: str
    ca_pem: bytes | None = None
    insecure: bool = False
    token: str | None = None
    token_file: Path | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    proxy: str | None = None
    tls_server_name: str | None = None
    source: CredentialSource | None = None
    namespace: str = "default"  # the context's namespace (kubectl's default when it names none)
    _server_given: bool = field(default=False, repr=False)
    _header: str | None = field(default=None, repr=False)
    _loaded_at: float | None = field(default=None, repr=False)
    _ca_file: str | None = field(default=None, repr=False)
    _cert_files: tuple[str, str] | None = field(default=None, repr=False)
    _ssl: ssl.SSLContext | None = field(default=None, repr=False)
    _lock: asyncio.Lock | None = field(default=None, repr=False)
    _attempts: int = field(default=0, repr=False)  # loads of the source finished so far
    _failure: str | None = field(default=None, repr=False)  # why the last one failed
    _clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def override_server(self, server: str) -> None:
        """Talk to `server` whatever the kubeconfig says (vcctl's `--master`)."""
        self.server, self._server_given = server.rstrip("/"), True

    async def prepare(self) -> None:
        """Load from the source once (no-op for static configs): server, TLS material, first credentials."""
        if self.source is not None and self._loaded_at is None:
            await self.authorization()

    async def authorization(self, *, force: bool = False) -> str | None:
        """The `Authorization` header value (`Bearer …`, `Basic …`) or None; asked of the source again when
        due or when `force`d (after a 401)."""
        if self.source is None:
            token = self.bearer_token()
            return f"Bearer {token}" if token else None
        due = self._loaded_at is None or self._clock() - self._loaded_at >= REFRESH_S or self.source.expired()
        if not (due or force):
            return self._header
        if self._lock is None:
            self._lock = asyncio.Lock()
        attempt = self._attempts
        async with self._lock:
            if self._attempts != attempt:
                # Another request asked the source while this one waited: share its answer. A failure is shared
                # too, so a burst of requests runs a failing exec plugin once, not once each.
                if self._failure is not None:
                    raise ConfigError(self._failure)
                return self._header
            try:
                self._apply(await self.source.load())
            except ConfigError as exc:
                self._failure = str(exc)
                raise
            else:
                self._failure = None
            finally:
                self._attempts += 1
        return self._header

    def _apply(self, loaded: _Loaded) -> None:
        if not self._server_given:
            self.server = str(loaded.host).rstrip("/")
        header = (loaded.api_key or {}).get("BearerToken")
        self._header = header.strip() if header else None
        self.insecure = not loaded.verify_ssl
        self.proxy = loaded.proxy or None
        self.tls_server_name = loaded.tls_server_name or None
        self._ca_file = loaded.ssl_ca_cert or None
        cert = (loaded.cert_file, loaded.key_file) if loaded.cert_file and loaded.key_file else None
        if cert != self._cert_files and cert is not None and self._ssl is not None:
            # An exec plugin handed out a new client certificate: new handshakes present it.
            self._ssl.load_cert_chain(*cert)
        self._cert_files = cert
        self._loaded_at = self._clock()

    def bearer_token(self) -> str | None:
        """The bearer token as last loaded (a static token file is re-read at most once a minute)."""
        if self.source is not None:
            header = self._header or ""
            return header.removeprefix("Bearer ") if header.startswith("Bearer ") else None
        if self.token:
            return self.token
        if self.token_file is None:
            return None
        now = self._clock()
        if self._loaded_at is None or now - self._loaded_at > REFRESH_S:
            self._header, self._loaded_at = self.token_file.read_text().strip(), now
        return self._header

    def ssl_context(self) -> ssl.SSLContext | bool:
        """An SSL context for aiohttp (False for plain http); one per config, so rotated client certificates
        reach the connections already made from it."""
        if not self.server.startswith("https://"):
            return False
        if self._ssl is None:
            self._ssl = self._new_ssl()
        return self._ssl

    def _new_ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_pem:
            ctx = ssl.create_default_context(cadata=self.ca_pem.decode())
        elif self._ca_file:
            ctx = ssl.create_default_context(cafile=self._ca_file)
        if self.client_cert_pem and self.client_key_pem:
            _load_cert_chain(ctx, self.client_cert_pem, self.client_key_pem)
        elif self._cert_files is not None:
            ctx.load_cert_chain(*self._cert_files)
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    # ssl only loads client certificates from files; keep them on disk just long enough to load.
    with tempfile.TemporaryDirectory(prefix="lapilli-kube-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)


def _kubeconfig_paths(path: str | os.PathLike[str] | None) -> str:
    if path is not None:
        return os.fspath(path)
    return os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def load_kubeconfig(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeConfig:
    """One context of a kubeconfig ($KUBECONFIG, merged as kubectl merges its `:`-separated files, else
    ~/.kube/config). The file is read now; credentials (an exec plugin run, an OIDC refresh) on first use."""
    paths = _kubeconfig_paths(path)
    missing = [p for p in paths.split(os.pathsep) if p and not Path(p).expanduser().is_file()]
    if missing and len(missing) == len([p for p in paths.split(os.pathsep) if p]):
        raise ConfigError(f"cannot read kubeconfig {paths}: no such file")
    try:
        merged = KubeConfigMerger(paths).config
        if merged is None:
            raise KeyError("no kubeconfig content")
        loader = KubeConfigLoader(config_dict=merged, active_context=context, config_base_path=None)
        ctx = loader.current_context or {}
        clusters = merged["clusters"]
        named = clusters.get_with_name(ctx["context"]["cluster"]) if clusters is not None else None
        if named is None:
            raise KeyError("clusters")
        cluster = named["cluster"]
        server = str(cluster["server"])
        fields = getattr(ctx["context"], "value", ctx["context"])  # a ConfigNode or its plain dict
        namespace = str(fields.get("namespace") or "default")
    except (ConfigException, OSError, yaml.YAMLError, KeyError, TypeError, AssertionError, ValueError) as exc:
        what = f"context {context!r}" if context else "its current-context"
        raise ConfigError(f"kubeconfig {paths}: cannot use {what}: {_one_line(exc)}") from exc
    return KubeConfig(server=server.rstrip("/"), source=_KubeconfigSource(loader, paths),
                      namespace=namespace)


def in_cluster_config(sa_dir: Path = SA_DIR) -> KubeConfig:
    """The pod's own service account, as client-go's rest.InClusterConfig resolves it; the projected token is
    re-read as it rotates."""
    loader = InClusterConfigLoader(token_filename=str(sa_dir / "token"), cert_filename=str(sa_dir / "ca.crt"))
    configuration = Configuration()
    try:
        loader.load_and_set(configuration)
    except (ConfigException, OSError) as exc:
        raise ConfigError(f"not in a cluster: {_one_line(exc)}") from exc
    own = sa_dir / "namespace"
    namespace = own.read_text().strip() if own.is_file() else ""
    return KubeConfig(server=str(configuration.host).rstrip("/"), source=_InClusterSource(loader),
                      namespace=namespace or "default")


def load_config(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeConfig:
    """An explicit kubeconfig, else $KUBECONFIG, else the in-cluster service account, else ~/.kube/config."""
    if path is None and not os.environ.get("KUBECONFIG") and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster_config()
    return load_kubeconfig(path, context)


def write_kubeconfig(path: Path, server: str, token: str, ca_pem: bytes | None, user: str = "admin") -> Path:
    """Write a one-context token kubeconfig (mode 0600), as the dev cluster hands out."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lapilli", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "lapilli", "context": {"cluster": "lapilli", "user": user}}],
        "current-context": "lapilli",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
