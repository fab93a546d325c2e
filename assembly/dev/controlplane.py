"""Command lines of etcd, kube-apiserver and kube-scheduler, and waiting for each to become ready.

Flags follow ../shared/reference/control-plane-notes.md: everything on 127.0.0.1 with free ports, the
apiserver's self-signed `--cert-dir`, static tokens, RBAC, `--endpoint-reconciler-type=none` (no loopback
endpoint error loop) and the admission webhooks Lapilli relies on.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from pathlib import Path

import aiohttp

from assembly.dev.binaries import Binaries
from assembly.dev.procs import ProcessRecord, is_alive

ADMISSION_PLUGINS = (
    "NamespaceLifecycle,ServiceAccount,Priority,DefaultTolerationSeconds,"
    "MutatingAdmissionWebhook,ValidatingAdmissionWebhook"
)
SERVICE_CIDR = "10.96.0.0/16"
# Watches of this one resource go straight to etcd (no watch cache), so compacting etcd gives their watchers
# a real 410 Gone at once; tests use it to exercise re-list paths. Lapilli itself never uses PodTemplates.
UNCACHED_RESOURCE = "podtemplates"


class ComponentFailed(RuntimeError):
    """A component exited or did not become ready in time; the message ends with its log's tail."""


def etcd_argv(bins: Binaries, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    return [
        str(bins.etcd), "--name=lapilli-dev", f"--data-dir={data_dir}",
        f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=lapilli-dev={peer}", "--log-level=warn",
    ]


def apiserver_argv(
    bins: Binaries, *, etcd_port: int, port: int, cert_dir: Path, sa_key: Path, sa_pub: Path, token_file: Path,
) -> list[str]:
    argv = [
        str(bins.apiserver),
        f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        f"--secure-port={port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--cert-dir={cert_dir}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={sa_pub}", f"--service-account-signing-key-file={sa_key}",
        "--authorization-mode=RBAC", f"--token-auth-file={token_file}",
        f"--enable-admission-plugins={ADMISSION_PLUGINS}",
        # A simulated node registers Ready, as a kubelet whose conditions are known; TaintNodesByCondition would
        # taint it not-ready at creation, for no controller here to lift: three more writes per node (the
        # registration's and the simulated kubelet's repairs), minutes of them at 5,000 nodes.
        "--disable-admission-plugins=TaintNodesByCondition",
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        f"--watch-cache-sizes={UNCACHED_RESOURCE}#0",
        # Room for the kubelet simulator and benchmarks; the defaults (400/200) throttle a 10,000-pod run.
        "--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
        "--profiling=false", "--v=1",
    ]
    if bins.version < (1, 21):
        # Without a controller-manager no token secrets appear, and 1.20's ServiceAccount admission refuses
        # pods until one does. Bound (projected) tokens need no secret; they are the default from 1.21.
        argv.append("--feature-gates=BoundServiceAccountTokenVolume=true")
    return argv


def scheduler_argv(bins: Binaries, config: Path, port: int) -> list[str]:
    # --port=0 turns off the insecure port 10251 where no config file overrides it (see schedconfig.render).
    return [str(bins.scheduler), f"--config={config}", f"--secure-port={port}", "--port=0", "--v=1"]


def log_tail(record: ProcessRecord, lines: int = 25) -> str:
    try:
        text = Path(record.log).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


async def wait_ready(
    record: ProcessRecord, url: str, *, timeout_s: float = 60.0, token: str | None = None,
    expect: bytes | None = None,
) -> None:
    """Poll `url` until it answers 200 (and contains `expect`), failing fast if the process dies."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # Readiness only: the serving certificates are self-signed and not trusted yet at this point.
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while True:
            if not is_alive(record):
                raise ComponentFailed(f"{record.name} exited while starting; log {record.log}:\n{log_tail(record)}")
            try:
                async with http.get(url, headers=headers, ssl=insecure if url.startswith("https") else False) as r:
                    body = await r.read()
                    if r.status == 200 and (expect is None or expect in body):
                        return
                    last = f"HTTP {r.status}: {body[:200]!r}"
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise ComponentFailed(
                    f"{record.name} not ready after {timeout_s:.0f}s ({url}: {last}); log {record.log}:\n"
                    f"{log_tail(record)}"
                )
            await asyncio.sleep(0.1)
