"""Helpers for the extender's end-to-end tests: isolated node pools inside the shared control plane, gangs of
pods, and polling."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from assembly.dev import DevCluster, NodeShape
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import NODES, PODGROUPS, PODS, PRIORITY_CLASSES, QUEUES

GROUP = "scheduling.k8s.io/group-name"


@dataclass
class Pool:
    """Nodes only this test's pods may use: labelled and tainted with the pool's name."""

    cluster: DevCluster
    name: str
    namespace: str
    nodes: list[str] = field(default_factory=list)
    podgroups: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)

    async def add_nodes(
        self, count: int, *, gpus: int, cpu: str = "16", memory: str = "64Gi", extra: dict[str, str] | None = None
    ) -> list[str]:
        shape = NodeShape(cpu=cpu, memory=memory, gpus=gpus, labels={"lapilli.io/pool": self.name},
                          taints=({"key": "lapilli.io/pool", "value": self.name, "effect": "NoSchedule"},))
        names = []
        for _ in range(count):
            name = f"{self.name}-{len(self.nodes)}"
            await self.cluster.add_node(name, shape)
            if extra:
                client = self.cluster.client
                assert client is not None
                node = await client.get(NODES, name)
                status = node.get("status") or {}
                resources = {key: {**(status.get(key) or {}), **extra} for key in ("capacity", "allocatable")}
                await client.patch_status(NODES, name, {"status": resources})
            self.nodes.append(name)
            names.append(name)
        return names

    def pod_spec(self, requests: dict[str, str], scheduler: str = "volcano", **extra: Any) -> dict[str, Any]:
        limits = {k: v for k, v in requests.items() if "/" in k}  # extended resources need limits
        return {
            "schedulerName": scheduler,
            "nodeSelector": {"lapilli.io/pool": self.name},
            "tolerations": [{"key": "lapilli.io/pool", "operator": "Equal", "value": self.name,
                             "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": requests, "limits": limits}}],
            **extra,
        }

    async def gang(
        self, name: str, size: int, requests: dict[str, str], *, min_member: int | None = None,
        queue: str = "default", annotations: dict[str, str] | None = None, priority_class: str | None = None,
        roles: list[tuple[str, int, dict[str, str]]] | None = None, scheduler: str = "volcano",
    ) -> list[str]:
        """A PodGroup and its pods `<name>-<role>-<i>`; `roles` overrides (role, count, requests)."""
        client = self.cluster.client
        assert client is not None
        roles = roles or [("w", size, requests)]
        total = sum(count for _, count, _ in roles)
        pg_spec: dict[str, Any] = {"minMember": total if min_member is None else min_member, "queue": queue}
        if priority_class:
            pg_spec["priorityClassName"] = priority_class
        await client.create(PODGROUPS, {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.namespace}, "spec": pg_spec,
        }, self.namespace)
        self.podgroups.append(name)
        pods = []
        for role, count, req in roles:
            for i in range(count):
                pod_name = f"{name}-{role}-{i}"
                extra = {"priorityClassName": priority_class} if priority_class else {}
                await client.create(PODS, {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod_name, "namespace": self.namespace,
                                 "annotations": {GROUP: name, **(annotations or {})}},
                    "spec": self.pod_spec(req, scheduler, **extra),
                }, self.namespace)
                self.pods.append(pod_name)
                pods.append(pod_name)
        return pods

    async def placed(self, pods: list[str]) -> dict[str, str]:
        """pod -> node for the pods the API server shows bound."""
        client = self.cluster.client
        assert client is not None
        out = {}
        for pod in pods:
            try:
                obj = await client.get(PODS, pod, self.namespace)
            except NotFound:
                continue
            node = (obj.get("spec") or {}).get("nodeName")
            if node:
                out[pod] = node
        return out

    async def cleanup(self) -> None:
        client = self.cluster.client
        assert client is not None
        for pod in self.pods:
            with contextlib.suppress(NotFound):
                await client.delete(PODS, pod, self.namespace, grace_period_seconds=0)
        for pg in self.podgroups:
            with contextlib.suppress(NotFound):
                await client.delete(PODGROUPS, pg, self.namespace)
        for res, names in ((NODES, self.nodes), (QUEUES, self.queues), (PRIORITY_CLASSES, self.classes)):
            for name in names:
                with contextlib.suppress(NotFound):
                    await client.delete(res, name)


@contextlib.asynccontextmanager
async def open_pool(cluster: DevCluster, test_name: str) -> AsyncIterator[Pool]:
    """A pool (and namespace) named after the test, cleaned up afterwards."""
    name = test_name.replace("_", "-").removeprefix("test-")[:30].rstrip("-")
    namespace = f"e2e-{name}"[:40].rstrip("-")
    await cluster.ensure_namespace(namespace)
    pool = Pool(cluster, name, namespace)
    try:
        yield pool
    finally:
        await pool.cleanup()


async def eventually(check: Callable[[], Awaitable[Any]], timeout_s: float = 30.0, every_s: float = 0.25) -> Any:
    """Poll `check` until it returns something truthy; fail with its last value."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(every_s)
    raise AssertionError(f"not within {timeout_s}s; last: {last!r}")
