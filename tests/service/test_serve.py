"""`lapilli serve` pieces over real TLS on loopback: the webhook component, its probes and metrics, the
certificate reload without dropping connections, and the settings check."""

import asyncio
import ssl

import aiohttp
import orjson
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from assembly.serve import WebhookSettings
from assembly.serve.component import run_components
from assembly.serve.ops import Ops
from assembly.serve.webhook import WebhookServer
from tests.service.reviews import job, queue, review
from webhook.certs import generate, service_hosts, write_bundle
from webhook.context import AdmissionContext
from webhook.listers import MemoryQueues

pytestmark = pytest.mark.asyncio(loop_scope="session")


def client_tls(ca_pem: bytes) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca_pem.decode())


async def served_certificate(port: int, ca_pem: bytes) -> x509.Certificate:
    """The certificate a new TLS connection is handed (read from the handshake, before anything is sent)."""
    _, writer = await asyncio.open_connection("localhost", port, ssl=client_tls(ca_pem))
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


class NotReady:
    name = "caches"

    async def start(self):
        return None

    async def stop(self):
        return None

    def ready(self):
        return False


@pytest.fixture
async def served(tmp_path):
    bundle = generate(service_hosts("lapilli-webhook", "lapilli-system"))
    paths = write_bundle(bundle, tmp_path)
    settings = WebhookSettings(
        host="127.0.0.1",
        port=0,
        tls_cert_file=paths["tls.crt"],
        tls_key_file=paths["tls.key"],
        tls_reload_interval_s=0.05,
    )
    registry = CollectorRegistry()
    components: list = []
    ops = Ops(registry, lambda: components)
    context = AdmissionContext(queues=MemoryQueues([queue("default")]))
    server = WebhookServer(settings, context, registry, extra_routes=ops.add_routes)
    components.append(server)
    await server.start()
    yield server, bundle, tmp_path, components, registry
    await server.stop()


async def test_admission_and_probes_over_tls(served):
    server, bundle, _, components, _ = served
    base = f"https://localhost:{server.port}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls(bundle.ca_cert))) as http:
        resp = await http.post(
            f"{base}/jobs/mutate",
            data=orjson.dumps(review(job(), uid="u-tls")),
            headers={"Content-Type": "application/json"},
        )
        body = orjson.loads(await resp.read())
        assert (
            resp.status == 200 and body["response"]["uid"] == "u-tls" and body["response"]["patchType"] == "JSONPatch"
        )
        assert (await http.get(f"{base}/healthz")).status == 200
        assert (await http.get(f"{base}/readyz")).status == 200
        components.append(NotReady())
        resp = await http.get(f"{base}/readyz")
        assert resp.status == 503 and orjson.loads(await resp.read()) == {"ready": False, "waiting": ["caches"]}
        metrics = await http.get(f"{base}/metrics")
        text = await metrics.text()
        assert metrics.headers["Content-Type"].startswith("text/plain")
        assert (
            'lapilli_webhook_admission_total{allowed="true",operation="CREATE",webhook="mutatejob.volcano.sh"} 1.0'
            in text
        )
        assert "lapilli_webhook_admission_duration_seconds_bucket" in text


async def test_plain_http_is_refused(served):
    server = served[0]
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientError):
            await http.get(f"http://127.0.0.1:{server.port}/healthz")


async def test_rotation_keeps_open_connections_and_serves_the_new_certificate(served):
    server, old, tmp_path, _, registry = served
    base = f"https://localhost:{server.port}"
    body = orjson.dumps(review(queue("q", state=None)))
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(ssl=client_tls(old.ca_cert), limit=1)
    async with aiohttp.ClientSession(connector=connector) as kept:
        assert (await kept.post(f"{base}/queues/mutate", data=body, headers=headers)).status == 200
        new = generate(service_hosts("lapilli-webhook", "lapilli-system"))  # new CA as well
        write_bundle(new, tmp_path)
        for _ in range(100):
            if registry.get_sample_value("lapilli_tls_reloads_total", {"result": "reloaded"}):
                break
            await asyncio.sleep(0.05)
        assert registry.get_sample_value("lapilli_tls_reloads_total", {"result": "reloaded"}) == 1
        # the connection opened before the rotation is still served (keep-alive, old certificate)
        for _ in range(3):
            assert (await kept.post(f"{base}/queues/mutate", data=body, headers=headers)).status == 200
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls(new.ca_cert))) as fresh:
        resp = await fresh.post(f"{base}/queues/mutate", data=body, headers=headers)
        assert resp.status == 200
    assert await served_certificate(server.port, new.ca_cert) == x509.load_pem_x509_certificate(new.cert)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls(old.ca_cert))) as stale:
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await stale.get(f"{base}/healthz")


async def test_components_stop_in_reverse_order():
    events = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        async def start(self):
            events.append(f"start {self.name}")

        async def stop(self):
            events.append(f"stop {self.name}")

        def ready(self):
            return True

    stop = asyncio.Event()
    task = asyncio.create_task(run_components([Recorder("a"), Recorder("b")], stop))
    await asyncio.sleep(0.01)
    stop.set()
    await task
    assert events == ["start a", "start b", "stop b", "stop a"]
