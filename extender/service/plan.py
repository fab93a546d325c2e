"""The plan the verbs answer from: for each admitted gang, pod → node, as the last session decided.

A planned pod is shown to later sessions as already placed on its node (an *assumed* pod, like kube-scheduler's
own cache), so the next session neither re-plans it nor gives its room away while kube-scheduler is still walking
the gang through filter and bind. A gang's entries go when its pods are bound (the cluster state reports each pod that
gets a node, ends or goes away), when its permit times out, or when the plan grows older than its time-to-live.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from extender.engine.snapshot import Snapshot
from lapilli.devices.assign import PodDevices


@dataclass(slots=True)
class GangPlan:
    key: str
    min_member: int
    nodes: dict[str, str]  # pod key (ns/name) -> node
    created: float
    domain: frozenset[str] | None = None  # the nodes of the HyperNode the session placed it in: re-plans stay there
    devices: dict[str, PodDevices] = field(default_factory=dict)  # pod key -> its vGPU cards on its node


@dataclass(slots=True)
class Plan:
    ttl_s: float
    gangs: dict[str, GangPlan] = field(default_factory=dict)
    gang_of_pod: dict[str, str] = field(default_factory=dict)
    version: int = 0
    # Told each node whose planned pods changed (the extender's card book re-reads that node's cards).
    on_node: Callable[[str], None] | None = None
    _placements: dict[str, str] = field(default_factory=dict)
    _placements_version: int = -1
    _devices: dict[str, PodDevices] = field(default_factory=dict)
    _devices_on: dict[str, list[tuple[str, PodDevices]]] = field(default_factory=dict)

    def node_for(self, pod_key: str) -> str | None:
        gang = self.gang_of_pod.get(pod_key)
        return None if gang is None else self.gangs[gang].nodes.get(pod_key)

    def devices_for(self, pod_key: str) -> PodDevices | None:
        """The vGPU cards planned for the pod on its planned node (None: it asks for none, or vGPU is off)."""
        gang = self.gang_of_pod.get(pod_key)
        return None if gang is None else self.gangs[gang].devices.get(pod_key)

    def add(self, key: str, min_member: int, nodes: Mapping[str, str], now: float,
            domain: frozenset[str] | None = None, devices: Mapping[str, PodDevices] | None = None) -> None:
        self.drop(key)
        self.gangs[key] = GangPlan(key, min_member, dict(nodes), now, domain, dict(devices or {}))
        for pod in nodes:
            self.gang_of_pod[pod] = key
        self.version += 1
        self._touched(nodes.values())

    def extend(self, key: str, min_member: int, nodes: Mapping[str, str], domain: frozenset[str] | None = None,
               devices: Mapping[str, PodDevices] | None = None) -> None:
        """More members of a gang already planned (a session placed the rest of it)."""
        gang = self.gangs[key]
        gang.nodes.update(nodes)
        gang.devices.update(devices or {})
        gang.min_member = min_member
        gang.domain = domain
        for pod in nodes:
            self.gang_of_pod[pod] = key
        self.version += 1
        self._touched(nodes.values())

    def move(self, pod_key: str, node: str, devices: PodDevices | None = None) -> None:
        gang = self.gangs[self.gang_of_pod[pod_key]]
        old = gang.nodes[pod_key]
        gang.nodes[pod_key] = node
        if devices is None:
            gang.devices.pop(pod_key, None)
        else:
            gang.devices[pod_key] = devices
        self.version += 1
        self._touched((old, node))

    def drop(self, key: str) -> None:
        gang = self.gangs.pop(key, None)
        if gang is not None:
            for pod in gang.nodes:
                self.gang_of_pod.pop(pod, None)
            self.version += 1
            self._touched(gang.nodes.values())

    def forget_pod(self, pod_key: str) -> None:
        """A planned pod got bound (or went away): the API server now says where it is."""
        gang = self.gang_of_pod.pop(pod_key, None)
        if gang is not None and gang in self.gangs:
            node = self.gangs[gang].nodes.pop(pod_key, None)
            self.gangs[gang].devices.pop(pod_key, None)
            if not self.gangs[gang].nodes:
                del self.gangs[gang]
            self.version += 1
            if node is not None:
                self._touched((node,))

    def _touched(self, nodes: Iterable[str]) -> None:
        if self.on_node is not None:
            for node in set(nodes):
                self.on_node(node)

    def expire(self, now: float) -> list[str]:
        old = [k for k, g in self.gangs.items() if now - g.created > self.ttl_s]
        for key in old:
            self.drop(key)
        return old

    def placements(self) -> dict[str, str]:
        """pod key -> planned node, for every planned pod (what a session must assume); rebuilt only when
        the plan changed."""
        if self._placements_version != self.version:
            self._placements = {pod: self.gangs[gang].nodes[pod] for pod, gang in self.gang_of_pod.items()}
            self._devices = {pod: devices for gang in self.gangs.values() for pod, devices in gang.devices.items()}
            self._devices_on = {}
            for pod, devices in self._devices.items():
                self._devices_on.setdefault(self._placements[pod], []).append((pod, devices))
            self._placements_version = self.version
        return self._placements

    def planned_devices(self) -> dict[str, PodDevices]:
        """pod key -> planned vGPU cards, for every planned pod given cards (rebuilt with `placements`)."""
        self.placements()
        return self._devices

    def devices_on(self, node: str) -> list[tuple[str, PodDevices]]:
        """(pod key, cards) of the pods planned onto `node` with cards."""
        self.placements()
        return self._devices_on.get(node, [])


def overlay(snap: Snapshot, placements: Mapping[str, str], devices: Mapping[str, PodDevices] | None = None) -> Snapshot:
    """`snap` (a copy the caller owns) with planned pods assumed on their planned nodes, holding their planned
    vGPU cards."""
    for pod_key, node in placements.items():
        pod = snap.pods.get(pod_key)
        if pod is not None and not pod.node_name and node in snap.nodes:
            assigned = (devices or {}).get(pod_key)
            facts = pod.devices
            if assigned is not None and facts is not None:
                facts = facts.with_assignment(node, assigned)
            snap.pods[pod_key] = dataclasses.replace(pod, node_name=node, devices=facts)
    return snap
