"""The extender port over TLS with client-certificate verification, served for real (aiohttp TCPSite on loopback)
and called by a real aiohttp client: the settings' context as `lapilli serve` builds it, certificates made by
`webhook.certs` as the dev cluster makes kube-scheduler's."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from assembly.serve.settings import Settings
from extender.service.http import make_app
from extender.service.settings import ExtenderSettings
from tests.service.extender_state import make_extender
from tests.unit.extender.engine.builders import node, queue
from webhook.certs import generate, generate_ca, issue_client_cert

ON_LOOP = pytest.mark.asyncio(loop_scope="session")


def _write(directory: Path, **files: bytes) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, data in files.items():
        out[name] = directory / name
        out[name].write_bytes(data)
    return out


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Path]:
    """A serving pair for 127.0.0.1, the CA of kube-scheduler's client certificate, a client pair it signed and
    one signed by another CA."""
    server = generate(["127.0.0.1", "localhost"])
    client_ca = generate_ca("kube-scheduler-client-ca")
    good = issue_client_cert(*client_ca, "kube-scheduler")
    stranger = issue_client_cert(*generate_ca("someone-else"), "kube-scheduler")
    return _write(
        tmp_path, server_ca=server.ca_cert, tls_crt=server.cert, tls_key=server.key, client_ca=client_ca[0],
        good_crt=good[0], good_key=good[1], bad_crt=stranger[0], bad_key=stranger[1],
    )


@pytest.fixture
async def served(pki: dict[str, Path]):
    settings = ExtenderSettings(port=0, tls_cert_file=pki["tls_crt"], tls_key_file=pki["tls_key"],
                                client_ca_file=pki["client_ca"])
    extender = make_extender([node({"name": "n0", "alloc": {"cpu": "8", "memory": "16Gi"}}),
                              queue({"name": "default"})])
    await extender.loop.run_once()
    runner = web.AppRunner(make_app(extender, lambda: True, lambda: True))
    await runner.setup()
    site = web.TCPSite(runner, settings.host, 0, ssl_context=settings.tls_context())
    await site.start()
    port = runner.addresses[0][1]
    yield f"https://127.0.0.1:{port}"
    await runner.cleanup()


def _client_context(pki: dict[str, Path], cert: str | None) -> ssl.SSLContext:
    """What kube-scheduler's tlsConfig makes: trust the extender's CA (caFile), present certFile/keyFile."""
    context = ssl.create_default_context(cafile=pki["server_ca"])
    if cert is not None:
        context.load_cert_chain(pki[f"{cert}_crt"], pki[f"{cert}_key"])
    return context


FILTER = {"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {}},
          "NodeNames": ["n0"], "Nodes": None}


@ON_LOOP
async def test_a_client_with_a_certificate_the_ca_signed_is_answered(served, pki):
    good = _client_context(pki, "good")
    async with aiohttp.ClientSession() as http, http.post(f"{served}/extender/filter", json=FILTER, ssl=good) as resp:
        assert resp.status == 200
        assert (await resp.json())["NodeNames"] == ["n0"]


@ON_LOOP
@pytest.mark.parametrize("cert", [None, "bad"], ids=["no client certificate", "certificate of another CA"])
async def test_other_clients_are_refused_in_the_handshake(served, pki, cert):
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientError):
            async with http.post(f"{served}/extender/filter", json=FILTER, ssl=_client_context(pki, cert)) as resp:
                await resp.read()  # TLS 1.3 may report the refused certificate on the first read


@ON_LOOP
async def test_plain_http_gets_no_answer(served):
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientError):
            async with http.post(served.replace("https", "http"), json=FILTER) as resp:
                await resp.read()


def test_defaults_listen_on_loopback_over_plain_http():
    assert ExtenderSettings().host == "127.0.0.1"
    assert ExtenderSettings().tls_context() is None


def test_tls_settings_are_checked_together(pki, tmp_path):
    def problems(**extender: object) -> list[str]:
        settings = Settings(extender=ExtenderSettings(**extender))  # type: ignore[arg-type]
        return [p for p in settings.problems() if "extender" in p]

    assert problems(client_ca_file=pki["client_ca"])[0].startswith("--extender-client-ca-file needs")
    assert problems(tls_cert_file=pki["tls_crt"]) == [
        "--extender-tls-cert-file and --extender-tls-key-file go together"]
    assert "no such file" in problems(tls_cert_file=tmp_path / "nope", tls_key_file=pki["tls_key"])[0]
    mismatched = problems(tls_cert_file=pki["tls_crt"], tls_key_file=pki["good_key"])
    assert len(mismatched) == 1 and mismatched[0].startswith("--extender-tls-cert-file/")
    assert problems(tls_cert_file=pki["tls_crt"], tls_key_file=pki["tls_key"], client_ca_file=pki["client_ca"]) == []
