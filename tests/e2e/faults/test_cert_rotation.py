"""The webhook's certificate rotated on disk (twice, as cert-manager renews it) while admission requests keep
coming: the new certificate is served without a restart (same process) and not one request fails."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

from cryptography import x509

from lapilli.kube import ApiError, NotFound
from lapilli.kube.resources import QUEUES
from tests.e2e.faults.helpers import service_pid
from tests.e2e.test_webhook import served_certificate
from tests.service.reviews import queue
from webhook.certs import generate, read_ca, write_bundle


async def test_a_rotated_certificate_is_served_without_restart_and_requests_keep_passing(faults):
    api = faults.client
    assert api is not None and faults.info is not None
    port = faults.info.ports["lapilli-webhook"]
    tls_dir = faults.state_dir / "webhook-tls"
    ca = read_ca(tls_dir)
    assert ca is not None
    pid = service_pid(faults)
    admitted: list[str] = []
    failures: list[str] = []
    stop = asyncio.Event()

    async def traffic() -> None:
        """Queues go through Lapilli's mutating and validating webhooks; each is created and deleted."""
        for i in itertools.count():
            if stop.is_set():
                return
            name = f"rotation-{i}"
            try:
                await api.create(QUEUES, queue(name, state=None))
                admitted.append(name)
            except ApiError as exc:
                failures.append(f"{name}: {exc}")
            with contextlib.suppress(NotFound):
                await api.delete(QUEUES, name)
            await asyncio.sleep(0.1)

    task = asyncio.create_task(traffic())
    try:
        served = [served_certificate(port, ca[0])]
        for _ in range(2):
            rotated = generate(["127.0.0.1", "localhost"], ca=ca)  # same CA: the registered caBundle stays valid
            write_bundle(rotated, tls_dir)
            expected = x509.load_pem_x509_certificate(rotated.cert)
            for _ in range(300):  # the service checks its files every 10 s
                if served_certificate(port, ca[0]) == expected:
                    break
                await asyncio.sleep(0.1)
            served.append(served_certificate(port, ca[0]))
            assert served[-1] == expected
        await asyncio.sleep(1)
    finally:
        stop.set()
        await task
    assert len({c.serial_number for c in served}) == 3, "each rotation is served"
    assert service_pid(faults) == pid, "served without a restart"
    assert not failures, failures
    assert len(admitted) >= 20, f"too little traffic to tell: {len(admitted)}"
