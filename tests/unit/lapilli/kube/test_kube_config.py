"""Kubeconfigs as users have them, loaded through kubernetes_asyncio: tokens inline and in rotating files, client
certificates, exec plugins (ExecCredential v1 and v1beta1, run again once expired), OIDC auth-provider tokens,
proxy-url, merged $KUBECONFIG, and the in-cluster projected token that rotates. What the raw client would send
(`authorization()`, `ssl_context()`, `proxy`) is checked here; tests/e2e/test_kube_credentials.py sends it to a
real kube-apiserver."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import lapilli.kube.config as kube_config
from lapilli.kube.config import ConfigError, KubeConfig, in_cluster_config, load_config, load_kubeconfig
from webhook.certs import generate, generate_ca, issue_client_cert


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _kubeconfig(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None,
                name: str = "config") -> Path:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": cluster or {"server": "https://127.0.0.1:6443/",
                                                           "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _plugin(tmp_path: Path, api_version: str, *, expires_in_s: float | None = None, cert: tuple[bytes, bytes] | None
            = None) -> tuple[Path, Path]:
    """A real exec credential plugin: prints an ExecCredential with the token in `token.txt` (or a client
    certificate) and counts its runs in `runs.txt`."""
    token, runs = tmp_path / "token.txt", tmp_path / "runs.txt"
    token.write_text("tok-1")
    runs.write_text("")
    status: dict[str, Any] = {}
    if cert is not None:
        status = {"clientCertificateData": cert[0].decode(), "clientKeyData": cert[1].decode()}
    script = tmp_path / "plugin.py"
    script.write_text(f"""#!{sys.executable}
import datetime, json, os, pathlib
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
assert info["apiVersion"] == {api_version!r} and info["kind"] == "ExecCredential", info
with open({str(runs)!r}, "a") as f:
    f.write("run\\n")
status = {status!r} or {{"token": pathlib.Path({str(token)!r}).read_text().strip()}}
if {expires_in_s!r} is not None:
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={expires_in_s!r})
    status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({{"apiVersion": {api_version!r}, "kind": "ExecCredential", "status": status}}))
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, runs


async def test_inline_token_and_server(tmp_path):
    config = load_kubeconfig(_kubeconfig(tmp_path, {"token": "abc"}))
    assert config.server == "https://127.0.0.1:6443"
    assert await config.authorization() == "Bearer abc"
    assert config.bearer_token() == "abc"
    assert config.insecure


async def test_token_file_is_read_again_as_it_rotates(tmp_path):
    (tmp_path / "tok").write_text("first\n")
    config = load_kubeconfig(_kubeconfig(tmp_path, {"tokenFile": str(tmp_path / "tok")}))
    config._clock = clock = Clock()
    assert await config.authorization() == "Bearer first"
    (tmp_path / "tok").write_text("second\n")
    assert await config.authorization() == "Bearer first", "kept until due"
    clock.now += kube_config.REFRESH_S
    assert await config.authorization() == "Bearer second"
    (tmp_path / "tok").write_text("third")
    assert await config.authorization(force=True) == "Bearer third", "a 401 asks again at once"


@pytest.mark.parametrize("api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"])
async def test_exec_plugin_token_is_kept_until_it_expires(tmp_path, api_version):
    script, runs = _plugin(tmp_path, api_version, expires_in_s=3600)
    exec_ = {"apiVersion": api_version, "command": str(script), "interactiveMode": "Never"}
    config = load_kubeconfig(_kubeconfig(tmp_path, {"exec": exec_}))
    config._clock = clock = Clock()
    assert await config.authorization() == "Bearer tok-1"
    clock.now += kube_config.REFRESH_S
    (tmp_path / "token.txt").write_text("tok-2")
    assert await config.authorization() == "Bearer tok-1", "not expired: the plugin is not run again"
    assert runs.read_text().count("run") == 1


async def test_an_expired_exec_credential_runs_the_plugin_again(tmp_path):
    api_version = "client.authentication.k8s.io/v1"
    script, runs = _plugin(tmp_path, api_version, expires_in_s=-60)
    config = load_kubeconfig(_kubeconfig(tmp_path, {"exec": {"apiVersion": api_version, "command": str(script)}}))
    assert await config.authorization() == "Bearer tok-1"
    (tmp_path / "token.txt").write_text("tok-2")
    assert await config.authorization() == "Bearer tok-2", "expired: run again on the next request, not due or not"
    assert runs.read_text().count("run") == 2


class _FailingSource:
    """A credential source that fails after a pause, counting how often it is asked."""

    def __init__(self) -> None:
        self.loads = 0

    def expired(self) -> bool:
        return False

    async def load(self):
        self.loads += 1
        await asyncio.sleep(0.01)
        raise ConfigError("exec: process returned 1. error: login expired")


async def test_requests_sent_together_share_one_failed_load():
    """A failure is answered to every request that waited for it: one exec plugin run per burst, not one each (five
    lists at once each ran a failing plugin again, and `lapilli job why` never ended)."""
    source = _FailingSource()
    config = KubeConfig(server="https://127.0.0.1:6443", source=source)
    results = await asyncio.gather(*(config.authorization() for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, ConfigError) and "login expired" in str(r) for r in results), results
    assert source.loads == 1
    with pytest.raises(ConfigError):  # a later request asks the source again
        await config.authorization()
    assert source.loads == 2


async def test_exec_plugin_client_certificate_is_presented(tmp_path):
    ca = generate_ca("client-ca")
    cert, key = issue_client_cert(*ca, "someone")
    api_version = "client.authentication.k8s.io/v1beta1"
    script, _ = _plugin(tmp_path, api_version, cert=(cert, key))
    server = generate(["127.0.0.1"])
    cluster = {"server": "https://127.0.0.1:6443",
               "certificate-authority-data": base64.b64encode(server.ca_cert).decode()}
    config = load_kubeconfig(_kubeconfig(tmp_path, {"exec": {"apiVersion": api_version, "command": str(script)}},
                                         cluster))
    assert await config.authorization() is None
    context = config.ssl_context()
    assert context is not False and context.verify_mode.name == "CERT_REQUIRED"
    assert config._cert_files is not None
    assert Path(config._cert_files[0]).read_bytes() == cert


async def test_a_failing_exec_plugin_is_one_readable_error(tmp_path):
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1", "command": "false"}
    config = load_kubeconfig(_kubeconfig(tmp_path, {"exec": exec_}))
    with pytest.raises(ConfigError, match=r"^kubeconfig .*: exec: process returned 1$"):
        await config.authorization()


async def test_oidc_auth_provider_id_token(tmp_path):
    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    exp = int((dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).timestamp())
    id_token = f"{part({'alg': 'none'})}.{part({'sub': 'me', 'exp': exp})}.sig"
    provider = {"name": "oidc", "config": {"id-token": id_token, "client-id": "kubectl",
                                           "idp-issuer-url": "https://issuer.invalid", "refresh-token": "r"}}
    config = load_kubeconfig(_kubeconfig(tmp_path, {"auth-provider": provider}))
    assert await config.authorization() == f"Bearer {id_token}"


async def test_client_certificate_files_proxy_and_server_name(tmp_path):
    server = generate(["127.0.0.1"])
    cert, key = issue_client_cert(*generate_ca("c"), "me")
    for name, data in (("ca.crt", server.ca_cert), ("me.crt", cert), ("me.key", key)):
        (tmp_path / name).write_bytes(data)
    cluster = {"server": "https://10.0.0.1:6443", "certificate-authority": "ca.crt",
               "proxy-url": "http://proxy.internal:3128", "tls-server-name": "kubernetes.default"}
    config = load_kubeconfig(_kubeconfig(tmp_path, {"client-certificate": "me.crt", "client-key": "me.key"},
                                         cluster))
    assert await config.authorization() is None
    assert config.proxy == "http://proxy.internal:3128"
    assert config.tls_server_name == "kubernetes.default"
    assert config._cert_files == (str(tmp_path / "me.crt"), str(tmp_path / "me.key"))
    assert config.ssl_context() is not False


async def test_kubeconfig_env_merges_its_files_and_context_is_chosen(tmp_path, monkeypatch):
    first = _kubeconfig(tmp_path, {"token": "one"}, name="a")
    doc = yaml.safe_load(first.read_text())
    doc["contexts"][0]["name"], doc["users"][0]["name"] = "other", "v"
    doc["contexts"][0]["context"]["user"] = "v"
    doc["users"][0]["user"] = {"token": "two"}
    doc.pop("current-context")
    (tmp_path / "b").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("KUBECONFIG", f"{first}{os.pathsep}{tmp_path / 'b'}")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert await load_config().authorization() == "Bearer one"
    assert await load_kubeconfig(context="other").authorization() == "Bearer two"
    with pytest.raises(ConfigError, match="cannot use context 'absent'"):
        load_kubeconfig(context="absent")
    with pytest.raises(ConfigError, match="no such file"):
        load_kubeconfig(tmp_path / "nope")


def test_the_context_namespace_defaults_to_default(tmp_path):
    path = _kubeconfig(tmp_path, {"token": "abc"})
    assert load_kubeconfig(path).namespace == "default"
    doc = yaml.safe_load(path.read_text())
    doc["contexts"][0]["context"]["namespace"] = "lab-a"
    path.write_text(yaml.safe_dump(doc))
    assert load_kubeconfig(path).namespace == "lab-a"


def test_in_cluster_namespace_is_the_service_accounts(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("sa-1")
    (tmp_path / "ca.crt").write_bytes(generate(["127.0.0.1"]).ca_cert)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert in_cluster_config(tmp_path).namespace == "default"
    (tmp_path / "namespace").write_text("research\n")
    assert in_cluster_config(tmp_path).namespace == "research"


async def test_in_cluster_projected_token_rotates(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("sa-1")
    (tmp_path / "ca.crt").write_bytes(generate(["127.0.0.1"]).ca_cert)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    config = in_cluster_config(tmp_path)
    assert config.server == "https://[fd00::1]:443"
    config._clock = clock = Clock()
    assert await config.authorization() == "Bearer sa-1"
    (tmp_path / "token").write_text("sa-2")
    clock.now += kube_config.REFRESH_S
    assert await config.authorization() == "Bearer sa-2"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(ConfigError, match="not in a cluster"):
        in_cluster_config(tmp_path)


def test_the_environment_proxy_is_read_once_for_the_api_server(monkeypatch):
    """HTTPS_PROXY applies to a kubeconfig's server unless NO_PROXY names it (kubectl's rule), read when the client
    makes its session instead of on every request."""
    from lapilli.kube.client import env_proxy

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.delenv("https_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert env_proxy("https://api.example:6443") == "http://proxy.internal:3128"
    monkeypatch.setenv("NO_PROXY", "api.example")
    assert env_proxy("https://api.example:6443") is None
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.delenv("NO_PROXY")
    assert env_proxy("https://api.example:6443") is None
