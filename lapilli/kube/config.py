"""Where the API server is and how to authenticate: kubeconfig files and in-cluster service accounts.

Supports what Lapilli's deployments and the dev cluster use: bearer tokens (inline or a token file that is
re-read, as projected service-account tokens rotate), client certificates (file or inline data), a CA
(file or inline data) and `insecure-skip-tls-verify`. Exec and auth-provider plugins are refused with a
clear error rather than half-supported.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SA_DIR: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_TOKEN_FILE_TTL_S = 60.0


class ConfigError(Exception):
    """The kubeconfig or in-cluster environment does not describe a usable connection."""


@dataclass(slots=True)
class KubeConfig:
    """One resolved connection: server URL, TLS material and credentials."""

    server: str
    ca_pem: bytes | None = None
    insecure: bool = False
    token: str | None = None
    token_file: Path | None = None
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    _token_cache: tuple[float, str] | None = field(default=None, repr=False)

    def bearer_token(self) -> str | None:
        """The token to send, re-reading a token file at most once a minute."""
        if self.token:
            return self.token
        if self.token_file is None:
            return None
        now = time.monotonic()
        if self._token_cache is None or now - self._token_cache[0] > _TOKEN_FILE_TTL_S:
            self._token_cache = (now, self.token_file.read_text().strip())
        return self._token_cache[1]

    def ssl_context(self) -> ssl.SSLContext | bool:
        """An SSL context for aiohttp (False for plain http or skipped verification)."""
        if not self.server.startswith("https://"):
            return False
        ctx = ssl.create_default_context()
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_pem:
            ctx = ssl.create_default_context(cadata=self.ca_pem.decode())
        if self.client_cert_pem and self.client_key_pem:
            _load_cert_chain(ctx, self.client_cert_pem, self.client_key_pem)
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    # ssl only loads client certificates from files; keep them on disk just long enough to load.
    with tempfile.TemporaryDirectory(prefix="lapilli-kube-") as tmp:
        cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        ctx.load_cert_chain(cert, key)


def _named(entries: list[dict[str, Any]] | None, name: str, what: str) -> dict[str, Any]:
    for entry in entries or []:
        if entry.get("name") == name:
            return dict(entry.get(what) or {})
    raise ConfigError(f"kubeconfig has no {what} named {name!r}")


def _material(section: dict[str, Any], key: str, base: Path) -> bytes | None:
    """`<key>-data` (base64) wins over `<key>` (a path relative to the kubeconfig's directory)."""
    data = section.get(f"{key}-data")
    if data:
        return base64.b64decode(data)
    path = section.get(key)
    if path:
        return (base / path).read_bytes()
    return None


def load_kubeconfig(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeConfig:
    """Resolve one context of a kubeconfig file ($KUBECONFIG's first entry, then ~/.kube/config)."""
    if path is None:
        env = os.environ.get("KUBECONFIG", "")
        path = env.split(os.pathsep)[0] if env else Path.home() / ".kube" / "config"
    file = Path(path)
    try:
        doc = yaml.safe_load(file.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {file}: {exc}") from exc
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise ConfigError(f"kubeconfig {file} names no current-context")
    ctx = _named(doc.get("contexts"), ctx_name, "context")
    cluster = _named(doc.get("clusters"), ctx["cluster"], "cluster")
    user = _named(doc.get("users"), ctx["user"], "user") if ctx.get("user") else {}
    if "exec" in user or "auth-provider" in user:
        raise ConfigError(f"kubeconfig {file}: exec/auth-provider credentials are not supported")
    base = file.resolve().parent
    token_file = user.get("tokenFile")
    return KubeConfig(
        server=str(cluster["server"]).rstrip("/"),
        ca_pem=_material(cluster, "certificate-authority", base),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        token=user.get("token"),
        token_file=(base / token_file) if token_file else None,
        client_cert_pem=_material(user, "client-certificate", base),
        client_key_pem=_material(user, "client-key", base),
    )


def in_cluster_config(sa_dir: Path = SA_DIR) -> KubeConfig:
    """The pod's own service account, as client-go's rest.InClusterConfig resolves it."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not in a cluster: KUBERNETES_SERVICE_HOST/PORT are unset")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return KubeConfig(
        server=f"https://{host}:{port}",
        ca_pem=(sa_dir / "ca.crt").read_bytes(),
        token_file=sa_dir / "token",
    )


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
