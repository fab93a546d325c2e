"""The admission webhook for real: kube-apiserver calls `lapilli serve` over TLS (the control-plane fixture
starts it and registers its configurations by URL), and kubectl prints Volcano's messages."""

from __future__ import annotations

import asyncio
import socket
import ssl
import uuid
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from assembly.dev import DevCluster
from tests.service.reviews import job, queue, task
from webhook.certs import generate, read_ca, write_bundle

NS = "e2e-webhook"


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster) -> DevCluster:
    assert control_plane.info is not None and control_plane.info.service, "the control plane runs without lapilli"
    await control_plane.ensure_namespace(NS)
    return control_plane


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def create(cluster: DevCluster, obj: dict, tmp_path: Path) -> tuple[int, str]:
    """`kubectl create -f <file>`: (exit code, stderr)."""
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    proc = cluster.kubectl("create", "-f", str(path), check=False)
    return proc.returncode, proc.stderr.strip()


def denied(cluster: DevCluster, obj: dict, tmp_path: Path, webhook: str, message: str) -> None:
    code, stderr = create(cluster, obj, tmp_path)
    assert code != 0
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    assert stderr.splitlines()[-1].endswith(
        f'error when creating "{path}": admission webhook "{webhook}" denied the request: {message}'
    ), stderr


async def test_job_with_min_available_above_replicas(cluster, tmp_path):
    name = unique("too-few")
    obj = job(name, task("worker", 2, minAvailable=3), namespace=NS, minAvailable=2)
    message = f"'minAvailable' is greater than 'replicas' in task: worker, job: {name};"
    denied(cluster, obj, tmp_path, "validatejob.volcano.sh", message)


async def test_job_to_a_closed_queue(cluster, tmp_path):
    closed = unique("closed")
    assert create(cluster, queue(closed, state=None), tmp_path)[0] == 0
    cluster.kubectl(
        "patch", "queue", closed, "--subresource=status", "--type=merge", "-p", '{"status": {"state": "Closed"}}'
    )
    try:
        obj = job(unique("late"), task("worker", 1), namespace=NS, queue=closed)
        message = f"can only submit job to queue with state `Open`, queue `{closed}` status is `Closed`;"
        await until_denied(cluster, obj, tmp_path, "validatejob.volcano.sh", message)
    finally:
        cluster.kubectl("delete", "queue", closed)  # the session's cluster is shared: leave no queue behind


async def until_denied(cluster: DevCluster, obj: dict, tmp_path: Path, webhook: str, message: str) -> None:
    """The webhook sees a Queue's status through its watch: allow the event a moment to arrive."""
    for _ in range(50):
        code, stderr = create(cluster, obj, tmp_path)
        if code != 0 and message in stderr:
            break
        if code == 0:
            cluster.kubectl("delete", "vcjob", "-n", NS, obj["metadata"]["name"], "--wait=false")
        await asyncio.sleep(0.1)
    denied(cluster, obj, tmp_path, webhook, message)


async def test_job_with_a_duplicated_task_name(cluster, tmp_path):
    obj = job(unique("twins"), task("worker", 1), task("worker", 1), namespace=NS)
    denied(cluster, obj, tmp_path, "validatejob.volcano.sh", "duplicated task name worker;")


async def test_queue_whose_deserved_exceeds_its_capability(cluster, tmp_path):
    obj = queue(unique("greedy"), state=None, deserved={"cpu": "8"}, capability={"cpu": "4"})
    message = 'requestBody.spec.deserved.cpu: Invalid value: "8": deserved[cpu]=8 must be <= capability[cpu]=4'
    denied(cluster, obj, tmp_path, "validatequeue.volcano.sh", message)


async def test_valid_job_shows_its_defaults(cluster, tmp_path):
    name = unique("ddp")
    obj = job(name, task("master", 1), task(None, 3), namespace=NS, plugins={"pytorch": []})
    code, stderr = create(cluster, obj, tmp_path)
    assert code == 0, stderr
    assert "Warning: plugin svc added: the pytorch plugin needs it" in stderr
    stored = yaml.safe_load(cluster.kubectl("get", "vcjob", "-n", NS, name, "-o", "yaml").stdout)
    spec = stored["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"]) == (
        "default",
        "volcano",
        3,
        4,
    )
    assert spec["plugins"] == {"pytorch": [], "svc": []}
    assert [(t["name"], t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [
        ("master", 1, 3),
        ("default1", 3, 3),
    ]


def served_certificate(port: int, ca_pem: bytes) -> x509.Certificate:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1") as conn:
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


async def test_rotating_the_certificate_keeps_admission_working(cluster, tmp_path):
    assert cluster.info is not None
    port = cluster.info.ports["lapilli-webhook"]
    tls_dir = cluster.state_dir / "webhook-tls"
    ca = read_ca(tls_dir)
    assert ca is not None
    before = served_certificate(port, ca[0])
    rotated = generate(["127.0.0.1", "localhost"], ca=ca)  # same CA: the registered caBundle stays valid
    write_bundle(rotated, tls_dir)
    expected = x509.load_pem_x509_certificate(rotated.cert)
    for _ in range(150):  # the service checks its files every 10 s
        if served_certificate(port, ca[0]) == expected:
            break
        await asyncio.sleep(0.1)
    assert served_certificate(port, ca[0]) == expected != before
    obj = job(unique("after-rotation"), task("worker", 2, minAvailable=3), namespace=NS, minAvailable=2)
    message = f"'minAvailable' is greater than 'replicas' in task: worker, job: {obj['metadata']['name']};"
    denied(cluster, obj, tmp_path, "validatejob.volcano.sh", message)
    code, stderr = create(cluster, job(unique("ok-after-rotation"), task("worker", 1), namespace=NS), tmp_path)
    assert code == 0, stderr
