"""A local Kubernetes control plane with Lapilli wired in: what `lapilli dev` and the test fixture run.

etcd, kube-apiserver and kube-scheduler run as background processes recorded in a state directory; the
simulated kubelet runs either as one more background process (`lapilli dev kubelet`, for `lapilli dev up`)
or as a task on the caller's event loop (tests). When `lapilli serve` exists it is started too and
kube-scheduler's extender entries point at it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal

import aiohttp
import yaml

from assembly.dev import procs
from assembly.dev.binaries import Binaries, find_binaries
from assembly.dev.bootstrap import SERVICE_NAMESPACE, bootstrap, create_or_replace, ensure_namespace, manifests_dir
from assembly.dev.controlplane import (
    ComponentFailed,
    apiserver_argv,
    etcd_argv,
    log_tail,
    scheduler_argv,
    wait_ready,
)
from assembly.dev.kubelet import SimKubelet
from assembly.dev.nodes import NodeShape, node_name, register_node
from assembly.dev.pki import StaticUser, new_token, write_service_account_keys, write_token_file
from assembly.dev.ports import free_ports
from assembly.dev.schedconfig import DEV_PROFILES, config_api_version, render
from assembly.dev.service import (
    EXTENDER_TLS_DIR,
    SERVICE_PID_FILE,
    WEBHOOK_EXEMPT_NAMESPACES,
    ServicePlan,
    exempt_namespace_patch,
    lapilli_argv,
    plan_service,
    service_available,
    service_pid,
    supervised,
)
from assembly.dev.topology import Tiers, discovery_configmap, node_labels
from assembly.dev.vgpu import VGPU_CONF, create_device_config, vgpu_shape
from lapilli.kube import KubeClient, load_kubeconfig
from lapilli.kube.config import write_kubeconfig
from lapilli.kube.resources import NAMESPACES

INFO_FILE: Final = "cluster.json"
KUBELET_READY_FILE: Final = "kubelet.ready"
# What `up` may remove from a state directory: only what it creates itself.
_OWNED: Final = ("pki", "logs", "pids", "etcd", "webhook-tls", EXTENDER_TLS_DIR, "kubeconfig", "scheduler.kubeconfig",
                 "service.kubeconfig", "scheduler-config.yaml", "scheduler-default-config.yaml", INFO_FILE,
                 KUBELET_READY_FILE, SERVICE_PID_FILE)
_SHM: Final = Path("/dev/shm")


class ClusterRunning(RuntimeError):
    """`up` found live processes of an earlier `up` in the same state directory."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """What to start. Field defaults are those of `lapilli dev up`."""

    state_dir: Path
    nodes: int = 8
    shape: NodeShape = field(default_factory=NodeShape)
    # Lapilli wired in: `lapilli serve` (webhook registered, extender entries once it serves them).
    # None: exactly when `lapilli serve` exists; True: required.
    extender: bool | None = None
    kubelet: Literal["process", "inprocess", "none"] = "process"
    tie_to_parent: bool = False  # processes die with the calling process (test sessions)
    etcd_in_memory: bool = True  # etcd data on /dev/shm when present: fsync is what makes etcd slow here
    kubelet_workers: int = 64
    serve_args: tuple[str, ...] = ()  # appended to `lapilli serve` (e.g. "--disable-controllers" in benchmarks)
    # The scheduler conf `lapilli serve --scheduler-conf` runs; None: the shipped one (manifests/scheduler).
    scheduler_conf: Path | None = None
    # kube-scheduler calls this extender URL instead of the service's (benchmarks measure what the extender
    # protocol itself costs with a do-nothing extender).
    extender_url: str | None = None
    # The service's extender port over TLS with kube-scheduler's client certificate, as an install whose
    # kube-scheduler runs elsewhere needs; False: plain HTTP on loopback, the shipped pod's topology (manifests/).
    extender_over_tls: bool = True
    heartbeat_s: float = 300.0  # a node status every 5 minutes, as kubelets report an unchanged one
    # False: no kube-scheduler (and no service); the caller brings its own, as the installed-mode tests run the
    # rendered scheduler pods in containers.
    kube_scheduler: bool = True
    # Shared GPUs (assembly/dev/vgpu.py): nodes register vGPU cards (every fourth MIG), the device config is
    # created, and the service runs examples/scheduler-conf-vgpu.yaml unless `scheduler_conf` names another.
    vgpu: bool = False
    # Network topology (assembly.dev.topology): the nodes labelled into this tree, and label discovery turned on
    # so the service makes HyperNodes of it.
    topology: Tiers = ()


@dataclass(slots=True)
class ClusterInfo:
    """What a running cluster looks like; kept in `<state_dir>/cluster.json` for `status` and `down`."""

    state_dir: str
    kubeconfig: str
    server: str
    kubernetes: str
    ports: dict[str, int]
    service: bool  # `lapilli serve` runs and its webhook is registered
    extender: bool  # kube-scheduler calls the service's extender
    etcd_data: str
    nodes: int
    ready_s: float = 0.0
    vgpu: bool = False

    @classmethod
    def load(cls, state_dir: Path) -> ClusterInfo | None:
        try:
            return cls(**json.loads((state_dir / INFO_FILE).read_text()))
        except (OSError, ValueError, TypeError):
            return None


@dataclass(frozen=True, slots=True)
class _Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    scheduler: int
    scheduler_http: int  # kube-scheduler 1.20's plain healthz/metrics listener (see schedconfig.render)
    webhook: int
    extender: int
    default_scheduler: int  # kube-scheduler for `default-scheduler` pods, when the extender is wired
    default_scheduler_http: int
    gpu_metrics: int  # the simulated kubelet's DCGM-style /metrics (assembly.dev.gpumetrics)

    def in_use(self, plan: ServicePlan | None) -> dict[str, int]:
        ports = {"etcd": self.etcd, "etcd-peer": self.etcd_peer, "kube-apiserver": self.apiserver,
                 "kube-scheduler": self.scheduler}
        if plan is not None and plan.extender_url:
            ports["kube-scheduler-default"] = self.default_scheduler
        if plan is not None:
            ports["lapilli-webhook"] = self.webhook
            if plan.extender_url:
                ports["lapilli-extender"] = self.extender
        return ports


@dataclass(frozen=True, slots=True)
class _Credentials:
    admin: StaticUser
    scheduler: StaticUser
    service: StaticUser
    token_file: Path
    sa_key: Path
    sa_pub: Path


def _write_credentials(pki: Path) -> _Credentials:
    """Service-account signing keys and the static users: an admin, kube-scheduler (bound by the built-in
    RBAC policy), and the service as its real ServiceAccount, so manifests/rbac is exactly what it may do."""
    sa_key, sa_pub = write_service_account_keys(pki)
    users = (
        StaticUser("admin", ("system:masters",), new_token()),
        StaticUser("system:kube-scheduler", (), new_token()),
        StaticUser(f"system:serviceaccount:{SERVICE_NAMESPACE}:lapilli",
                   ("system:serviceaccounts", f"system:serviceaccounts:{SERVICE_NAMESPACE}"), new_token()),
    )
    token_file = write_token_file(pki / "tokens.csv", list(users))
    return _Credentials(*users, token_file=token_file, sa_key=sa_key, sa_pub=sa_pub)


class DevCluster:
    """`await up()` starts everything and returns once it is ready; `await down()` stops all of it."""

    def __init__(self, spec: ClusterSpec, binaries: Binaries | None = None) -> None:
        self.spec = spec
        self.state_dir = spec.state_dir.resolve()
        self.binaries = binaries
        self.info: ClusterInfo | None = None
        self.client: KubeClient | None = None
        self.kubelet: SimKubelet | None = None
        self._order = 0
        self._node_count = 0
        self._kubelet_client: KubeClient | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    # -- up ----------------------------------------------------------------------------------------------

    async def up(self) -> ClusterInfo:
        """Start etcd, kube-apiserver, (the service), kube-scheduler, the kubelet and the nodes."""
        began = time.monotonic()
        self._prepare_state_dir()
        try:
            info = await self._start_all()
        except BaseException:
            await self.down()
            raise
        info.ready_s = round(time.monotonic() - began, 2)
        (self.state_dir / INFO_FILE).write_text(json.dumps(asdict(info), indent=2))
        self.info = info
        return info

    def _prepare_state_dir(self) -> None:
        live = [r.name for r in procs.records(self.state_dir) if procs.is_alive(r)]
        if live:
            raise ClusterRunning(
                f"a dev cluster already runs from {self.state_dir} ({', '.join(live)}); `lapilli dev down` first"
            )
        _remove_etcd_data(self.state_dir)
        for name in _OWNED:
            path = self.state_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        self.state_dir.mkdir(parents=True, exist_ok=True)

    def _spawn(self, name: str, argv: list[str]) -> procs.ProcessRecord:
        self._order += 1
        return procs.spawn(name, argv, self.state_dir, tie_to_parent=self.spec.tie_to_parent, order=self._order)

    async def _start_all(self) -> ClusterInfo:
        bins = self.binaries = self.binaries or find_binaries()
        ports = _Ports(*free_ports(10))
        creds = _write_credentials(self.state_dir / "pki")
        server, ca_pem = await self._start_etcd_and_apiserver(bins, ports, creds)
        write_kubeconfig(self.kubeconfig, server, creds.admin.token, ca_pem)
        sched_kc = write_kubeconfig(self.state_dir / "scheduler.kubeconfig", server, creds.scheduler.token, ca_pem,
                                    user="kube-scheduler")
        svc_kc = write_kubeconfig(self.state_dir / "service.kubeconfig", server, creds.service.token, ca_pem,
                                  user="lapilli")
        self.client = KubeClient(load_kubeconfig(self.kubeconfig))

        wanted = service_available() if self.spec.extender is None else self.spec.extender
        # --vgpu runs the vGPU conf unless a conf is named.
        conf = self.spec.scheduler_conf or (VGPU_CONF if self.spec.vgpu else None)
        plan = (
            plan_service(self.state_dir, svc_kc, ports.webhook, ports.extender, self.spec.serve_args, conf,
                         extender_over_tls=self.spec.extender_over_tls)
            if wanted else None
        )
        if wanted and plan is None:
            raise ComponentFailed("the Lapilli service was asked for, but `lapilli serve` does not exist yet")
        await bootstrap(self.client, manifests_dir())
        if self.spec.vgpu:  # before the kubelet starts: it reads the MIG geometries from it, as the device plugin
            await create_device_config(self.client, conf or VGPU_CONF)
        await asyncio.gather(
            self._start_scheduler(sched_kc, ports, plan),
            self._start_kubelet(ports.gpu_metrics),
            self._create_nodes(self.spec.nodes),
        )
        if self.spec.topology:
            await create_or_replace(self.client, discovery_configmap(self.spec.topology, SERVICE_NAMESPACE))
        return ClusterInfo(
            state_dir=str(self.state_dir), kubeconfig=str(self.kubeconfig), server=server,
            kubernetes=bins.version_text, service=plan is not None,
            ports={**ports.in_use(plan), **self._kubelet_port(ports.gpu_metrics)},
            extender=plan is not None and plan.extender_url is not None,
            etcd_data=str((self.state_dir / "etcd").resolve()), nodes=self.spec.nodes, vgpu=self.spec.vgpu,
        )

    async def _start_etcd_and_apiserver(self, bins: Binaries, ports: _Ports, creds: _Credentials) -> tuple[str, bytes]:
        """Both running and ready; returns the server URL and the CA to trust it with."""
        etcd = self._spawn("etcd", etcd_argv(bins, self._etcd_data_dir(), ports.etcd, ports.etcd_peer))
        await wait_ready(etcd, f"http://127.0.0.1:{ports.etcd}/health", timeout_s=30, expect=b'"health":"true"')
        cert_dir = self.state_dir / "pki" / "apiserver"
        apiserver = self._spawn("kube-apiserver", apiserver_argv(
            bins, etcd_port=ports.etcd, port=ports.apiserver, cert_dir=cert_dir, sa_key=creds.sa_key,
            sa_pub=creds.sa_pub, token_file=creds.token_file,
        ))
        server = f"https://127.0.0.1:{ports.apiserver}"
        await wait_ready(apiserver, f"{server}/readyz", timeout_s=90, token=creds.admin.token)
        # The serving certificate file holds the certificate and the self-signed CA that issued it.
        return server, (cert_dir / "apiserver.crt").read_bytes()

    def _etcd_data_dir(self) -> Path:
        """`<state_dir>/etcd`, a directory or (in memory) a symlink to one under /dev/shm."""
        link = self.state_dir / "etcd"
        if self.spec.etcd_in_memory and _SHM.is_dir():
            data = _SHM / f"lapilli-etcd-{new_token()[:12]}"
            data.mkdir(mode=0o700)
            link.symlink_to(data)
            return data
        link.mkdir(mode=0o700)
        return link

    async def _start_scheduler(self, kubeconfig: Path, ports: _Ports, plan: ServicePlan | None) -> None:
        """The Lapilli service first (when wired, under a supervisor that restarts it as a Deployment would),
        then kube-scheduler: with the extender entries, one for `volcano` pods and a second, extender-free one
        for `default-scheduler` pods, as the shipped configuration runs next to a cluster's own scheduler, so
        ordinary pods are scheduled while the service is down."""
        assert self.binaries is not None and self.client is not None
        if not self.spec.kube_scheduler:
            return
        if plan is not None:
            service = self._spawn("lapilli", supervised(plan.argv, self.state_dir))
            await wait_ready(service, plan.ready_url, timeout_s=60)
            for name in WEBHOOK_EXEMPT_NAMESPACES:
                await self.client.patch(NAMESPACES, name, exempt_namespace_patch())
            for configuration in plan.webhook_configurations:
                await create_or_replace(self.client, configuration)
        version = config_api_version(self.binaries.version)
        extender_url = self.spec.extender_url or (plan.extender_url if plan is not None else None)
        schedulers = [("kube-scheduler", "scheduler-config.yaml", ports.scheduler, render(
            version, kubeconfig=str(kubeconfig), extender_url=extender_url, insecure_port=ports.scheduler_http,
            profiles=("volcano",) if extender_url else DEV_PROFILES,
            # The service's extender port asks for kube-scheduler's client certificate (a benchmark's own
            # extender URL is plain HTTP).
            extender_tls=plan.extender_tls if plan is not None and not self.spec.extender_url else None,
        ))]
        if extender_url:
            schedulers.append(("kube-scheduler-default", "scheduler-default-config.yaml", ports.default_scheduler,
                               render(version, kubeconfig=str(kubeconfig), profiles=("default-scheduler",),
                                      insecure_port=ports.default_scheduler_http)))
        started = []
        for name, file, port, config in schedulers:
            config_path = self.state_dir / file
            config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            started.append((self._spawn(name, scheduler_argv(self.binaries, config_path, port)), port))
        for record, port in started:
            await wait_ready(record, f"https://127.0.0.1:{port}/healthz", timeout_s=60)

    def service_pid(self) -> int | None:
        """The pid of `lapilli serve` itself (its supervisor's child), or None while it is not running."""
        return service_pid(self.state_dir)

    def _kubelet_port(self, picked: int) -> dict[str, int]:
        if self.spec.kubelet == "none":
            return {}
        served = self.kubelet.metrics_port if self.kubelet is not None else None
        return {"gpu-metrics": served or picked}

    async def _start_kubelet(self, metrics_port: int) -> None:
        """The simulated kubelet, serving its GPUs' utilisation on `metrics_port` (DCGM-style /metrics)."""
        mode = self.spec.kubelet
        if mode == "inprocess":
            # Its own client: the kubelet's connection pool must not compete with the caller's requests.
            self._kubelet_client = KubeClient(load_kubeconfig(self.kubeconfig))
            # Port 0: it binds once the cluster is up, late enough for a port picked now to have been taken since
            # as some connection's own port; the one it gets is read back for `info.ports`.
            self.kubelet = SimKubelet(
                self._kubelet_client, workers=self.spec.kubelet_workers, heartbeat_s=self.spec.heartbeat_s,
                metrics_port=0,
            )
            self.kubelet.start()
            async with asyncio.timeout(60):
                await self.kubelet.ready.wait()
        elif mode == "process":
            ready_file = self.state_dir / KUBELET_READY_FILE
            record = self._spawn("kubelet", lapilli_argv(
                "dev", "kubelet", "--kubeconfig", str(self.kubeconfig), "--ready-file", str(ready_file),
                "--workers", str(self.spec.kubelet_workers), "--heartbeat", str(self.spec.heartbeat_s),
                "--metrics-port", str(metrics_port),
            ))
            deadline = time.monotonic() + 60
            while not ready_file.exists():
                if not procs.is_alive(record) or time.monotonic() > deadline:
                    raise ComponentFailed(f"simulated kubelet did not start; log {record.log}:\n{log_tail(record)}")
                await asyncio.sleep(0.1)

    async def _create_nodes(self, count: int) -> None:
        gate = asyncio.Semaphore(32)

        async def one(index: int) -> None:
            shape = self._shape(index)
            if self.spec.topology:
                shape = replace(shape, labels={**shape.labels, **node_labels(index, count, self.spec.topology)})
            async with gate:
                await self.add_node(node_name(index, count), shape, index=index)

        await asyncio.gather(*(one(i) for i in range(count)))

    # -- while running -----------------------------------------------------------------------------------

    def _api(self) -> KubeClient:
        if self.client is None:
            raise RuntimeError("the cluster is not up")
        return self.client

    async def ensure_namespace(self, name: str) -> None:
        """Namespace plus its `default` ServiceAccount (no controller-manager makes one)."""
        await ensure_namespace(self._api(), name)

    async def add_node(self, name: str, shape: NodeShape | None = None, *, index: int | None = None) -> dict[str, Any]:
        """Register a simulated node (Ready, schedulable) and return it as the server has it."""
        if index is None:
            index = self.spec.nodes + self._node_count
        self._node_count += 1
        return await register_node(self._api(), name, shape or self._shape(index), index)

    def _shape(self, index: int) -> NodeShape:
        """Node `index`'s shape: the spec's, with vGPU cards when the cluster shares GPUs."""
        return vgpu_shape(self.spec.shape, index) if self.spec.vgpu else self.spec.shape

    async def compact_etcd(self) -> int:
        """Compact etcd to its current revision (what kube-apiserver does every 5 minutes); returns it.

        Watchers of uncached resources (controlplane.UNCACHED_RESOURCE) resuming from an older
        resourceVersion then get 410 Gone from the real server.
        """
        if self.info is None:
            raise RuntimeError("the cluster is not up")
        base = f"http://127.0.0.1:{self.info.ports['etcd']}/v3/kv"
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/range", json={"key": "AA==", "limit": 1}) as resp:
                revision = int((await resp.json())["header"]["revision"])
            async with http.post(f"{base}/compaction", json={"revision": str(revision), "physical": True}) as resp:
                resp.raise_for_status()
        return revision

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster (version-skew warnings of a newer kubectl are filtered out)."""
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        proc = subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True, env=env, timeout=120)
        proc.stderr = "".join(line for line in proc.stderr.splitlines(True) if "version difference" not in line)
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    # -- down --------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop the in-process kubelet and close the clients; background processes keep running."""
        if self.kubelet is not None:
            await self.kubelet.stop()
            self.kubelet = None
        for client in (self._kubelet_client, self.client):
            if client is not None:
                await client.close()
        self._kubelet_client = self.client = None

    async def down(self) -> list[str]:
        """Stop the kubelet, then every process (last started first); remove etcd's data. Names stopped."""
        await self.close()
        return stop_state_dir(self.state_dir)


def _remove_etcd_data(state_dir: Path) -> None:
    """Free etcd's in-memory data (the target of `<state_dir>/etcd`); on-disk data stays until the next up."""
    link = state_dir / "etcd"
    if link.is_symlink():
        target = link.resolve()
        if target.parent == _SHM and target.name.startswith("lapilli-etcd-"):
            shutil.rmtree(target, ignore_errors=True)
        link.unlink()


def stop_state_dir(state_dir: Path) -> list[str]:
    """Stop whatever runs from `state_dir` (also from another process's `up`) and drop etcd's memory."""
    stopped = procs.stop_all(state_dir)
    _remove_etcd_data(state_dir)
    for name in (KUBELET_READY_FILE, INFO_FILE):  # logs, certificates and kubeconfig stay for post-mortems
        (state_dir / name).unlink(missing_ok=True)
    return stopped


def status(state_dir: Path) -> dict[str, Any]:
    """What runs from `state_dir`: the cluster info and each recorded process with its liveness."""
    info = ClusterInfo.load(state_dir)
    return {
        "state_dir": str(state_dir.resolve()),
        "cluster": asdict(info) if info else None,
        "processes": [
            {"name": r.name, "pid": r.pid, "running": procs.is_alive(r), "log": r.log}
            for r in procs.records(state_dir)
        ],
    }
