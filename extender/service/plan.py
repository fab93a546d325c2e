"""The plan the verbs answer from: for each admitted gang, pod → node, as the last session decided.

A planned pod is shown to later sessions as already placed on its node (an *assumed* pod, like kube-scheduler's
own cache), so the next session neither re-plans it nor gives its room away while kube-scheduler is still walking
the gang through filter and bind. A gang's entries go when its pods are bound (the cluster state reports each pod that
gets a node, ends or goes away), when its permit times out, or when the plan grows older than its time-to-live.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from extender.engine.snapshot import Snapshot


@dataclass(slots=True)
class GangPlan:
    key: str
    min_member: int
    nodes: dict[str, str]  # pod key (ns/name) -> node
    created: float
    domain: frozenset[str] | None = None  # the nodes of the HyperNode the session placed it in: re-plans stay there


@dataclass(slots=True)
class Plan:
    ttl_s: float
    gangs: dict[str, GangPlan] = field(default_factory=dict)
    gang_of_pod: dict[str, str] = field(default_factory=dict)
    version: int = 0
    _placements: dict[str, str] = field(default_factory=dict)
    _placements_version: int = -1

    def node_for(self, pod_key: str) -> str | None:
        gang = self.gang_of_pod.get(pod_key)
        return None if gang is None else self.gangs[gang].nodes.get(pod_key)

    def add(self, key: str, min_member: int, nodes: dict[str, str], now: float,
            domain: frozenset[str] | None = None) -> None:
        self.drop(key)
        self.gangs[key] = GangPlan(key, min_member, dict(nodes), now, domain)
        for pod in nodes:
            self.gang_of_pod[pod] = key
        self.version += 1

    def move(self, pod_key: str, node: str) -> None:
        self.gangs[self.gang_of_pod[pod_key]].nodes[pod_key] = node
        self.version += 1

    def drop(self, key: str) -> None:
        gang = self.gangs.pop(key, None)
        if gang is not None:
            for pod in gang.nodes:
                self.gang_of_pod.pop(pod, None)
            self.version += 1

    def forget_pod(self, pod_key: str) -> None:
        """A planned pod got bound (or went away): the API server now says where it is."""
        gang = self.gang_of_pod.pop(pod_key, None)
        if gang is not None and gang in self.gangs:
            self.gangs[gang].nodes.pop(pod_key, None)
            if not self.gangs[gang].nodes:
                del self.gangs[gang]
            self.version += 1

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
            self._placements_version = self.version
        return self._placements


def overlay(snap: Snapshot, placements: dict[str, str]) -> Snapshot:
    """`snap` (a copy the caller owns) with planned pods assumed on their planned nodes."""
    for pod_key, node in placements.items():
        pod = snap.pods.get(pod_key)
        if pod is not None and not pod.node_name and node in snap.nodes:
            snap.pods[pod_key] = dataclasses.replace(pod, node_name=node)
    return snap
