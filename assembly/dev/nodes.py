"""Simulated nodes: Node objects made through the API, as a kubelet would register them.

Creating a Node keeps the status sent with it, but the TaintNodesByCondition admission adds
`node.kubernetes.io/not-ready:NoSchedule`, which kube-scheduler respects; without a real kubelet nobody
lifts it, so registration removes it right after the create (the simulated kubelet repairs it later too).

Each node also gets the CSINode a kubelet registers beside it (no drivers). kube-scheduler's CSI volume-limit
filter looks a node's CSINode up for every pod that has a volume, the service-account token included; a missing
one is answered by building a NotFound error, which cost ~12 % of kube-scheduler's CPU at 5,000 nodes in
bench/restart.py, work a real cluster never does.
"""

from __future__ import annotations

import contextlib
import ipaddress
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lapilli.devices.names import NODE_REGISTER, VGPU_CORES, VGPU_MEMORY, VGPU_NUMBER
from lapilli.devices.register import Card, encode_register
from lapilli.kube import AlreadyExists, KubeClient
from lapilli.kube.resources import CSI_NODES, NODES
from lapilli.meta import name_of, section
from lapilli.times import rfc3339

SIM_LABEL: Final = "sim.lapilli.io/simulated"
SIM_SELECTOR: Final = f"{SIM_LABEL}=true"
GPU: Final = "nvidia.com/gpu"
# Taints a node controller or admission puts on nodes that are not (yet) ready; a healthy kubelet has none.
UNREADY_TAINTS: Final = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_NODE_IPS: Final = ipaddress.IPv4Address("172.16.0.1")
_POD_CIDRS: Final = ipaddress.IPv4Network("10.128.0.0/9")
KUBELET_VERSION: Final = "v1.20.2-sim"


@dataclass(frozen=True, slots=True)
class CardShape:
    """A simulated node's vGPU cards, as the HAMi vGPU device plugin registers them: `count` cards of `memory` MB
    of one model, shared by up to `split` pods each, in sharing `mode` (hami-core or mig)."""

    count: int
    memory: int = 81920
    type: str = "NVIDIA-A100-SXM4-80GB"
    mode: str = "hami-core"
    split: int = 10

    def register(self, node: str) -> str:
        """The node's `volcano.sh/node-vgpu-register` annotation."""
        cards = [Card(i, f"GPU-{node}-{i}", self.split, self.memory, self.type, True, self.mode)
                 for i in range(self.count)]
        return encode_register(cards)

    def allocatable(self) -> dict[str, str]:
        """The totals the device plugin advertises: cards × split, all cards' MB, 100 % per card."""
        return {VGPU_NUMBER: str(self.count * self.split), VGPU_MEMORY: str(self.count * self.memory),
                VGPU_CORES: str(self.count * 100)}


@dataclass(frozen=True, slots=True)
class NodeShape:
    """Capacity, labels and taints of one simulated node (and its vGPU cards, if any)."""

    cpu: str = "64"
    memory: str = "512Gi"
    gpus: int = 8
    pods: int = 110
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    cards: CardShape | None = None


def parse_label(text: str) -> tuple[str, str]:
    """`key=value` (as `kubectl label`)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"label {text!r} is not key=value")
    return key, value


def parse_taint(text: str) -> dict[str, str]:
    """`key[=value]:Effect` (as `kubectl taint`)."""
    spec, sep, effect = text.rpartition(":")
    if not sep or effect not in TAINT_EFFECTS:
        raise ValueError(f"taint {text!r} is not key[=value]:Effect with Effect one of {', '.join(TAINT_EFFECTS)}")
    key, _, value = spec.partition("=")
    if not key:
        raise ValueError(f"taint {text!r} has no key")
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def node_name(index: int, count: int) -> str:
    return f"sim-node-{index:0{max(3, len(str(count - 1)))}d}"


def node_ip(index: int) -> str:
    return str(_NODE_IPS + index)


def pod_cidr(index: int) -> str:
    return str(next(_POD_CIDRS.subnets(new_prefix=24)).network_address + 256 * index) + "/24"


def ready_conditions(now: float) -> list[dict[str, str]]:
    """The node conditions of a healthy kubelet, with `now` as heartbeat."""
    stamp = rfc3339(now)
    healthy = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    return [
        {"type": t, "status": s, "reason": r, "message": "simulated by lapilli", "lastHeartbeatTime": stamp,
         "lastTransitionTime": stamp}
        for t, s, r in healthy
    ]


def node_object(name: str, shape: NodeShape, index: int, now: float | None = None) -> dict[str, Any]:
    """The Node a kubelet would register, status included."""
    resources = {"cpu": shape.cpu, "memory": shape.memory, "pods": str(shape.pods), "ephemeral-storage": "1Ti"}
    if shape.gpus:
        resources[GPU] = str(shape.gpus)
    annotations = {}
    if shape.cards is not None:
        resources.update(shape.cards.allocatable())
        annotations[NODE_REGISTER] = shape.cards.register(name)
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "lapilli-sim", SIM_LABEL: "true", **shape.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"podCIDR": pod_cidr(index), "podCIDRs": [pod_cidr(index)], "taints": [dict(t) for t in shape.taints]},
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
            "conditions": ready_conditions(time.time() if now is None else now),
            "addresses": [{"type": "InternalIP", "address": node_ip(index)}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION, "containerRuntimeVersion": "sim://1.0",
                "osImage": "Lapilli simulated node", "kernelVersion": "sim", "machineID": name, "systemUUID": name,
                "bootID": name,
            },
        },
    }


def csinode_object(node: Mapping[str, Any]) -> dict[str, Any]:
    """The CSINode a kubelet registers for its node: no CSI drivers, owned by the Node (so a collector removes it
    with the node)."""
    meta = section(node, "metadata")
    owner = {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": meta["name"], "ownerReferences": [owner]}, "spec": {"drivers": []}}


def slim_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """Only what the kubelet reads (a Reflector transform)."""
    meta, spec, status = section(node, "metadata"), section(node, "spec"), section(node, "status")
    slim_meta = {k: meta[k] for k in ("name", "uid", "resourceVersion") if k in meta}
    register = (meta.get("annotations") or {}).get(NODE_REGISTER)
    if register is not None:  # the simulated device plugin checks pods' cards against it
        slim_meta["annotations"] = {NODE_REGISTER: register}
    return {
        "metadata": slim_meta,
        "spec": {k: spec[k] for k in ("podCIDR", "taints") if k in spec},
        "status": {
            "conditions": [{"type": c.get("type"), "status": c.get("status")} for c in status.get("conditions") or []],
            "addresses": status.get("addresses") or [],
        },
    }


def is_ready(node: Mapping[str, Any]) -> bool:
    """Ready=True and none of the not-ready taints: what kube-scheduler needs to place pods."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    tainted = any(t.get("key") in UNREADY_TAINTS for t in (node.get("spec") or {}).get("taints") or [])
    return ready and not tainted


def kept_taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The node's taints without the not-ready ones (the user's own taints stay)."""
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") not in UNREADY_TAINTS]


async def make_ready(client: KubeClient, node: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """Ready=True through nodes/status and the not-ready taints lifted from spec."""
    name = name_of(node)
    stamp = time.time() if now is None else now
    conditions = {"status": {"conditions": ready_conditions(stamp)}}
    await client.patch_status(NODES, name, conditions, patch_type="strategic")
    return await client.patch(NODES, name, {"spec": {"taints": kept_taints(node) or None}})


async def register_node(client: KubeClient, name: str, shape: NodeShape, index: int) -> dict[str, Any]:
    """Create (or find) the node and its CSINode and make it schedulable; returns the node as the server has it."""
    try:
        node = await client.create(NODES, node_object(name, shape, index))
    except AlreadyExists:
        node = await client.get(NODES, name)
    with contextlib.suppress(AlreadyExists):  # registered before: a restarted simulation, or a node re-added
        await client.create(CSI_NODES, csinode_object(node))
    if is_ready(node):
        return node
    return await make_ready(client, node)
