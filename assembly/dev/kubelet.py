"""The simulated kubelet: one asyncio task that plays kubelet for every simulated node.

Two reflectors (simulated nodes by label; bound pods by `spec.nodeName!=`) feed a de-duplicating work
queue; a bounded pool of workers applies `podsim`'s decisions through pods/status patches and deletes, so
thousands of pods move without one slow request holding up the rest. Nodes are kept Ready: a node that
shows up not-ready or tainted `not-ready` is repaired at once, and every node gets a heartbeat
(`lastHeartbeatTime`) spread evenly over the heartbeat period rather than in one burst: every 5 minutes by default,
as a kubelet reports an unchanged status since node Leases took over its heartbeat (nodeStatusReportFrequency). The
pods of a node that is deleted are deleted too, as kube-controller-manager's pod garbage collector does with orphaned
pods (a dev cluster runs none): their owners see them gone and act, as on a real cluster.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from aiohttp import web

from assembly.dev.devicesim import REFUSED_REASON, CardAdmission
from assembly.dev.gpumetrics import GpuSeries, exposition, node_series
from assembly.dev.nodes import SIM_SELECTOR, is_ready, make_ready, slim_node
from assembly.dev.podsim import finished_patch, next_action, outcome, rejected_patch, running_patch, slim_pod
from lapilli.cluster import Event, RateLimiter, Reflector, WorkQueue, run_worker
from lapilli.cluster.workqueue import Cause
from lapilli.devices.config import NvidiaConfig, config_from_configmap
from lapilli.devices.names import CONFIG_MAP, CONFIG_NAMESPACE
from lapilli.kube import REQUEST_ERRORS, Conflict, KubeClient, NotFound
from lapilli.kube.resources import CONFIG_MAPS, NODES, PODS
from lapilli.meta import key_of, name_of, namespace_of, revision, uid_of
from lapilli.tasks import cancel_and_wait
from lapilli.times import parse_rfc3339, rfc3339

log = logging.getLogger(__name__)

Item = tuple[Literal["pod", "node", "orphan"], str]
MAX_HEARTBEATS_PER_S: Final = 20.0
_HEARTBEAT_TYPES = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")


@dataclass(slots=True)
class KubeletStats:
    """Counters since start, and start lags (first sight of a bound pod -> Running written) since the last
    report: how far behind the kubelet itself is, apart from the API server's own delays."""

    started: int = 0
    finished: int = 0
    deleted: int = 0
    orphans: int = 0  # pods of deleted nodes, deleted (the pod garbage collector's part)
    repaired_nodes: int = 0
    refused: int = 0  # pods the simulated vGPU device plugin refused (their cards over-full or unknown)
    heartbeats: int = 0
    errors: int = 0
    start_lags: list[float] = field(default_factory=list)

    def report(self) -> str:
        """One log line; resets the lag window."""
        lags, self.start_lags = sorted(self.start_lags), []
        window = (
            f"start lag p50 {lags[len(lags) // 2] * 1000:.0f}ms p99 {lags[int(len(lags) * 0.99)] * 1000:.0f}ms "
            f"max {lags[-1] * 1000:.0f}ms over {len(lags)}" if lags else "no starts"
        )
        return (f"started {self.started} finished {self.finished} deleted {self.deleted} orphans {self.orphans} "
                f"repaired {self.repaired_nodes} refused {self.refused} heartbeats {self.heartbeats} "
                f"errors {self.errors}; {window}")


class PodIPs:
    """Pod IPs per node, from the node's /24 podCIDR (.2 upwards; .1 is the node's bridge), released when a pod
    stops. A rotating cursor makes allocation O(1) in the common case."""

    def __init__(self) -> None:
        self._used: dict[str, dict[int, str]] = {}  # node -> last octet -> pod key
        self._of: dict[str, tuple[str, str]] = {}  # pod key -> (node, ip)
        self._cursor: dict[str, int] = {}

    def claim(self, node: str, key: str, ip: str) -> None:
        self._used.setdefault(node, {})[int(ip.rsplit(".", 1)[1])] = key
        self._of[key] = (node, ip)

    def allocate(self, node: str, cidr: str, key: str) -> str:
        if key in self._of:
            return self._of[key][1]
        used = self._used.setdefault(node, {})
        prefix = str(ipaddress.IPv4Network(cidr).network_address).rsplit(".", 1)[0]
        start = self._cursor.get(node, 0)
        for step in range(253):
            octet = 2 + (start + step) % 253
            if octet not in used:
                self._cursor[node] = start + step + 1
                ip = f"{prefix}.{octet}"
                self.claim(node, key, ip)
                return ip
        raise RuntimeError(f"node {node}: pod CIDR {cidr} exhausted")

    def release(self, key: str) -> None:
        if (held := self._of.pop(key, None)) is not None:
            self._used.get(held[0], {}).pop(int(held[1].rsplit(".", 1)[1]), None)


def _node_ip(node: dict[str, Any]) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return "127.0.0.1"


class SimKubelet:
    """Run with `await kubelet.run()` (until cancelled) or `kubelet.start()` / `await kubelet.stop()`."""

    def __init__(
        self, client: KubeClient, *, workers: int = 64, heartbeat_s: float = 300.0, node_selector: str = SIM_SELECTOR,
        device_config: NvidiaConfig | None = None, metrics_port: int | None = None,
    ) -> None:
        """`device_config`: the vGPU device config the simulated device plugin reads (MIG geometries); None: the
        cluster's `volcano-vgpu-device-config`, read at start. `metrics_port`: serve the simulated GPUs' utilisation on
        http://127.0.0.1:PORT/metrics, as the DCGM exporter would (`gpumetrics`); 0 picks a free port (then
        `metrics_port` is the bound one once `ready` is set)."""
        self.client = client
        self.metrics_port = metrics_port
        self._metrics_runner: web.AppRunner | None = None
        self._bad_util: dict[str, str] = {}  # pod -> why its utilisation annotation is not read (logged once)
        self.workers = workers
        self.heartbeat_s = heartbeat_s
        self.nodes = Reflector(client, NODES, label_selector=node_selector, handlers=[self._on_node], name="sim-nodes",
                               transform=slim_node)
        self.pods = Reflector(client, PODS, field_selector="spec.nodeName!=", handlers=[self._on_pod], name="sim-pods",
                              transform=slim_pod)
        self.queue: WorkQueue[Item] = WorkQueue(RateLimiter(1.0, 30.0))  # a failed write: 1 s doubling to 30 s
        self.ready = asyncio.Event()
        self.stats = KubeletStats()
        self._ips = PodIPs()
        self._pods_on: dict[str, set[str]] = {}  # node -> keys of pods bound to it
        self._written: dict[str, int] = {}  # pod key -> resourceVersion of our last write (skip older views)
        self._started: dict[str, float] = {}  # pod UID -> precise local start time
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._first_seen: dict[str, float] = {}  # pod key -> when we first saw it bound and not yet started
        self._task: asyncio.Task[None] | None = None
        # The simulated vGPU device plugin: the cards each node's pods hold, checked as a pod starts.
        self.cards = CardAdmission(device_config) if device_config is not None else CardAdmission()
        self._read_config = device_config is None

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name="sim-kubelet")
        return self._task

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _read_device_config(self) -> None:
        """The vGPU device config, read once as the device plugin reads it at start (its MIG geometries name the
        slices pods are given); without it, the defaults."""
        try:
            found = await self.client.get(CONFIG_MAPS, CONFIG_MAP, CONFIG_NAMESPACE)
            self.cards.config = config_from_configmap(found.get("data")).nvidia
        except NotFound:
            pass
        except (*REQUEST_ERRORS, ValueError) as exc:
            log.warning("sim-kubelet: vGPU device config %s/%s not read (%s); using the defaults",
                        CONFIG_NAMESPACE, CONFIG_MAP, exc)

    async def run(self) -> None:
        tasks: list[asyncio.Task[Any]] = []
        try:
            if self._read_config:
                await self._read_device_config()
            tasks.append(self.nodes.start())
            await self.nodes.synced.wait()  # pods are only acted on once their node is known
            tasks.append(self.pods.start())
            tasks += [asyncio.create_task(self._worker(), name=f"sim-kubelet-{i}") for i in range(self.workers)]
            await self.pods.synced.wait()
            if self.metrics_port is not None:
                await self._serve_metrics(self.metrics_port)
            self.ready.set()
            tasks.append(asyncio.create_task(self._heartbeats(), name="sim-kubelet-heartbeat"))
            tasks.append(asyncio.create_task(self._reports(), name="sim-kubelet-report"))
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for timer in self._timers.values():
                timer.cancel()
            if self._metrics_runner is not None:
                await self._metrics_runner.cleanup()
                self._metrics_runner = None

    # -- the simulated GPUs' metrics ---------------------------------------------------------------------

    async def _serve_metrics(self, port: int) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._metrics_runner = web.AppRunner(app, access_log=None)
        await self._metrics_runner.setup()
        site = web.TCPSite(self._metrics_runner, "127.0.0.1", port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []
        self.metrics_port = sockets[0].getsockname()[1] if sockets else port
        log.info("sim-kubelet: GPU metrics on http://127.0.0.1:%d/metrics", self.metrics_port)

    def gpu_series(self, now: float | None = None) -> list[GpuSeries]:
        """DCGM_FI_DEV_GPU_UTIL of every Running pod with GPUs on a simulated node."""
        now = time.time() if now is None else now
        out: list[GpuSeries] = []
        for node in sorted(self.nodes.store):
            running = []
            for key in self._pods_on.get(node, ()):
                pod = self.pods.store.get(key)
                if pod is None or (pod.get("status") or {}).get("phase") != "Running":
                    continue
                started = self._started.get(uid_of(pod))
                if started is None:
                    stamp = (pod.get("status") or {}).get("startTime")
                    started = parse_rfc3339(stamp) if stamp else now
                running.append((pod, now - started))
            series, problems = node_series(node, running)
            out += series
            for key, why in problems.items():
                if self._bad_util.get(key) != why:
                    log.warning("sim-kubelet: pod %s exports no GPU utilisation: %s", key, why)
            self._bad_util = {k: v for k, v in {**self._bad_util, **problems}.items() if k in self.pods.store}
        return out

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=exposition(self.gpu_series()), content_type="text/plain", charset="utf-8",
                            headers={"X-Content-Type-Options": "nosniff"})

    # -- event handlers: cheap bookkeeping, then a key on the queue --------------------------------------

    def _on_node(self, event: Event) -> None:
        name = name_of(event.obj)
        if event.type == "DELETED":
            for key in self._pods_on.get(name, ()):
                self.queue.add(("orphan", key))
            return
        if not is_ready(event.obj):
            self.queue.add(("node", name))
        if event.old is None:  # a new node: pods that were bound to it before we knew it can start now
            for key in self._pods_on.get(name, ()):
                self.queue.add(("pod", key))

    def _on_pod(self, event: Event) -> None:
        pod = event.obj
        key = key_of(pod)
        node = pod["spec"]["nodeName"]
        if event.type == "DELETED":
            self._forget(key, node, uid_of(pod))
            return
        self._pods_on.setdefault(node, set()).add(key)
        status = pod.get("status") or {}
        if status.get("phase", "Pending") == "Pending":
            self._first_seen.setdefault(key, time.monotonic())
        if status.get("phase") == "Running" and status.get("podIP"):
            self._ips.claim(node, key, status["podIP"])
            self.cards.running(pod, node)
        elif status.get("phase") in ("Succeeded", "Failed"):
            self.cards.stopped(key, node)
        if node in self.nodes.store:
            self.queue.add(("pod", key))

    def _forget(self, key: str, node: str, uid: str) -> None:
        self._pods_on.get(node, set()).discard(key)
        self.cards.stopped(key, node)
        self._ips.release(key)
        self._written.pop(key, None)
        self._first_seen.pop(key, None)
        self._started.pop(uid, None)
        if (timer := self._timers.pop(key, None)) is not None:
            timer.cancel()

    # -- workers -----------------------------------------------------------------------------------------

    async def _worker(self) -> None:
        await run_worker(self.queue, self._process, name="sim-kubelet", retried=self._retried)

    def _retried(self, _cause: Cause) -> None:
        self.stats.errors += 1

    async def _process(self, item: Item) -> None:
        try:
            if item[0] == "pod":
                await self._sync_pod(item[1])
            elif item[0] == "orphan":
                await self._collect_orphan(item[1])
            else:
                await self._sync_node(item[1])
        except (NotFound, Conflict):
            pass  # deleted or re-created meanwhile: its own events bring it back if there is work left

    async def _sync_node(self, name: str) -> None:
        node = self.nodes.store.get(name)
        if node is not None and not is_ready(node):
            await make_ready(self.client, node)
            self.stats.repaired_nodes += 1

    async def _collect_orphan(self, key: str) -> None:
        """A pod bound to a node that no longer exists is deleted at once (PodGC's orphan sweep, without its wait)."""
        pod = self.pods.store.get(key)
        if pod is None or pod["spec"]["nodeName"] in self.nodes.store:
            return
        await self.client.delete(PODS, name_of(pod), namespace_of(pod), grace_period_seconds=0, uid=uid_of(pod) or None)
        self.stats.orphans += 1

    async def _sync_pod(self, key: str) -> None:
        pod = self.pods.store.get(key)
        if pod is None:
            return
        node = self.nodes.store.get(pod["spec"]["nodeName"])
        if node is None or revision(pod) < self._written.get(key, 0):
            return  # not our node, or a view older than our own last write: its newer event is on the way
        name, namespace, uid = name_of(pod), namespace_of(pod), uid_of(pod)
        try:
            action = next_action(pod, self._started.get(uid))
        except ValueError as exc:
            log.warning("sim-kubelet: pod %s: bad simulation annotation: %s; leaving it running", key, exc)
            return
        now = time.time()
        if action.kind == "start" and (refused := self.cards.refusal(pod, node)) is not None:
            log.warning("sim-kubelet: pod %s refused on %s: %s", key, name_of(node), refused)
            patch = rejected_patch(pod, reason=REFUSED_REASON, message=f"Pod was rejected: {refused}")
            self._written[key] = revision(await self.client.patch_status(PODS, name, patch, namespace))
            self.stats.refused += 1
        elif action.kind == "start":
            ip = self._ips.allocate(name_of(node), node["spec"]["podCIDR"], key)
            patch = running_patch(pod, pod_ip=ip, host_ip=_node_ip(node), now=now)
            written = await self.client.patch_status(PODS, name, patch, namespace)
            self._written[key] = revision(written)
            self._started[uid] = now
            self.stats.started += 1
            if (seen := self._first_seen.pop(key, None)) is not None:
                self.stats.start_lags.append(time.monotonic() - seen)
        elif action.kind == "finish":
            if action.at > now:
                if (old := self._timers.pop(key, None)) is not None:
                    old.cancel()
                self._timers[key] = self.queue.add_after(("pod", key), action.at - now)
                return
            patch = finished_patch(pod, exit_code=outcome(pod).exit_code, now=now)
            written = await self.client.patch_status(PODS, name, patch, namespace)
            self._written[key] = revision(written)
            self._ips.release(key)
            self.cards.stopped(key, name_of(node))
            self.stats.finished += 1
        elif action.kind == "delete":
            await self.client.delete(PODS, name, namespace, grace_period_seconds=0, uid=uid or None)
            self._ips.release(key)
            self.stats.deleted += 1

    async def _reports(self, every_s: float = 30.0) -> None:
        while True:
            await asyncio.sleep(every_s)
            log.info("sim-kubelet: %s; queue %d", self.stats.report(), len(self.queue))

    # -- heartbeats --------------------------------------------------------------------------------------

    async def _heartbeats(self) -> None:
        """Touch each node's conditions once per period, one node at a time at an even pace, and at most
        MAX_HEARTBEATS_PER_S a second: each heartbeat is a Node update every node watcher decodes (kube-scheduler's,
        the service's), and 5,000 nodes every 60 s would keep them busy with nothing but that. The period stretches
        instead, as nothing here reads the heartbeat's age (there is no node lifecycle controller)."""
        while True:
            names = list(self.nodes.store)
            pace = max(self.heartbeat_s / max(1, len(names)), 1 / MAX_HEARTBEATS_PER_S)
            if not names:
                await asyncio.sleep(self.heartbeat_s)
            for name in names:
                began = time.monotonic()
                if name in self.nodes.store:
                    await self._heartbeat(name)
                await asyncio.sleep(max(0.0, pace - (time.monotonic() - began)))

    async def _heartbeat(self, name: str) -> None:
        stamp = rfc3339(time.time())
        patch = {"status": {"conditions": [{"type": t, "lastHeartbeatTime": stamp} for t in _HEARTBEAT_TYPES]}}
        try:
            await self.client.patch_status(NODES, name, patch, patch_type="strategic")
            self.stats.heartbeats += 1
        except REQUEST_ERRORS as exc:
            self.stats.errors += 1
            log.warning("sim-kubelet: heartbeat of node %s failed: %s", name, exc)
