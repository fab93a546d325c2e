"""The plan the verbs answer from: for each admitted gang, pod → node, as the last session decided.

A planned pod is shown to later sessions as already placed on its node (an *assumed* pod, like kube-scheduler's
own cache), so the next session neither re-plans it nor gives its room away while kube-scheduler is still walking
the gang through filter and bind. A gang's entries go when its pods are bound (the cluster state reports each pod that
gets a node, ends or goes away), when its permit times out, or when the plan grows older than its time-to-live.

A pod that got its node stays assumed there for the sessions a while longer (`assumed`, `SETTLING_S`): the session
process keeps its own copy of the cluster, which hears of a bind after the service (the Binding's answer, or the
service's own watch) has. Until it does, a session that no longer assumed the pod would see the pod's room free and
plan another gang into it, and kube-scheduler, which has the pod there, would not offer that node to the new gang's
members. A session whose copy already shows the pod bound leaves the entry out (`overlay`). The same holds for a pod
the service bound with no plan (filter picked its node, `bound`): its room is no freer for a session that has not
heard of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from extender.engine.snapshot import Snapshot
from lapilli.devices.assign import PodDevices

# How long a bound pod stays assumed on its node for the sessions after the service heard of the bind: longer than
# the session process's own watch trails the service's on a busy machine. Waiting longer costs only a larger
# placement map (a session whose copy shows the pod bound leaves its entry out).
SETTLING_S: Final = 10.0


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
    # Pods since bound, planned or not: pod key -> (node, when the service heard of it, its cards there), for `assumed`.
    _settling: dict[str, tuple[str, float, PodDevices | None]] = field(default_factory=dict)
    # Counts changes of `_settling` alone: they are not the plan's (`version`), so the verbs' caches of the plan
    # (`placements`, `devices_on`) stay valid through the binds of a burst of single pods.
    _settling_changes: int = 0
    _assumed: tuple[dict[str, str], dict[str, PodDevices]] = field(default_factory=lambda: ({}, {}))
    _assumed_version: tuple[int, int] = (-1, -1)

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

    def forget_pod(self, pod_key: str, bound_on: str | None = None, now: float = 0.0) -> None:
        """A planned pod got its node (`bound_on`, heard of at `now`), or ended or went away (None): the API server
        now says where it is. A bound pod stays assumed there for the sessions until `SETTLING_S` after `now`; one
        that ended or went away holds no room, and a pod made again under its name is a new one."""
        gang = self.gang_of_pod.pop(pod_key, None)
        if gang is not None and gang in self.gangs:
            node = self.gangs[gang].nodes.pop(pod_key, None)
            devices = self.gangs[gang].devices.pop(pod_key, None)
            if not self.gangs[gang].nodes:
                del self.gangs[gang]
            self.version += 1
            if node is not None:
                if bound_on is not None:
                    self._settling[pod_key] = (bound_on, now, devices if bound_on == node else None)
                self._touched((node,))
        elif bound_on is None and self._settling.pop(pod_key, None) is not None:
            self._settling_changes += 1

    def bound(self, pod_key: str, node: str, now: float, devices: PodDevices | None = None) -> None:
        """The service bound the pod to `node`, its Binding answered at `now`: a planned pod leaves the plan
        (`forget_pod`); one bound with no plan (filter picked its node) holding `devices` there is assumed for the
        sessions the same while they may not have heard of it."""
        if pod_key in self.gang_of_pod:
            self.forget_pod(pod_key, node, now)
        else:
            self._settling[pod_key] = (node, now, devices)
            self._settling_changes += 1

    def _touched(self, nodes: Iterable[str]) -> None:
        if self.on_node is not None:
            for node in set(nodes):
                self.on_node(node)

    def expire(self, now: float) -> list[str]:
        """Drop the gangs planned longer than the time-to-live ago (their keys) and stop assuming the pods bound
        longer than `SETTLING_S` ago."""
        old = [k for k, g in self.gangs.items() if now - g.created > self.ttl_s]
        for key in old:
            self.drop(key)
        settled = [k for k, (_, at, _) in self._settling.items() if now - at > SETTLING_S]
        for key in settled:
            del self._settling[key]
        if settled:
            self._settling_changes += 1
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

    def assumed(self) -> tuple[dict[str, str], dict[str, PodDevices]]:
        """What a session must assume (pod key -> node, and pod key -> vGPU cards): every planned pod, and every
        pod bound less than `SETTLING_S` ago, from the plan or by the service with none (see the module docstring);
        rebuilt only when either changed, so an unchanged plan is the same two objects."""
        if self._assumed_version != (self.version, self._settling_changes):
            placements, devices = self.placements(), self.planned_devices()
            if self._settling:
                placements, devices = dict(placements), dict(devices)
            for pod, (node, _, cards) in self._settling.items():
                if pod not in placements:
                    placements[pod] = node
                    if cards is not None:
                        devices[pod] = cards
            self._assumed, self._assumed_version = (placements, devices), (self.version, self._settling_changes)
        return self._assumed

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
