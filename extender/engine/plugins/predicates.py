"""predicates: kube-scheduler's node filters (Volcano's `plugins/predicates`, upstream filter plugins).

Static filters (NodeUnschedulable, NodeAffinity incl. nodeSelector, TaintToleration) depend only on the pod's
selector/affinity/tolerations, so the session caches their mask per distinct pod template. NodePorts,
InterPodAffinity (`interpodaffinity.py`) and PodTopologySpread's DoNotSchedule constraints (`podtopologyspread.py`)
depend on what is already placed and are evaluated per task, for the tasks they concern; the pod-count limit is the
`pods` dimension of the resource fit. Arguments `predicate.NodeAffinityEnable`, `predicate.NodePortsEnable`,
`predicate.TaintTolerationEnable`, `predicate.PodAffinityEnable`, `predicate.PodTopologySpreadEnable` (default true)
switch filters off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from extender.engine.arguments import Arguments, boolean
from extender.engine.interface import Index, Mask, SessionView
from extender.engine.model import Node, Task
from extender.engine.plugins.podparts import FilterPart, open_filters
from extender.engine.registry import register_plugin

REASON_UNSCHEDULABLE: Final = "node(s) were unschedulable"
REASON_AFFINITY: Final = "node(s) didn't match Pod's node affinity/selector"
REASON_TAINT: Final = "node(s) had untolerated taint"
REASON_PORTS: Final = "node(s) didn't have free ports for the requested pod ports"


@dataclass(frozen=True, slots=True)
class PredicatesArgs:
    affinity: bool = True
    taints: bool = True
    ports: bool = True
    pod_affinity: bool = True
    spread: bool = True


def parse_arguments(arguments: Arguments) -> PredicatesArgs:
    return PredicatesArgs(
        affinity=boolean(arguments, "predicate.NodeAffinityEnable", True),
        taints=boolean(arguments, "predicate.TaintTolerationEnable", True),
        ports=boolean(arguments, "predicate.NodePortsEnable", True),
        pod_affinity=boolean(arguments, "predicate.PodAffinityEnable", True),
        spread=boolean(arguments, "predicate.PodTopologySpreadEnable", True),
    )


def _port_conflict(task: Task, node: Node) -> bool:
    for ip, proto, port in task.host_ports:
        for used_ip, used_proto, used_port in node.used_ports:
            if port == used_port and proto == used_proto and (ip == used_ip or "0.0.0.0" in (ip, used_ip)):
                return True
    return False


class NodeFilters:
    """The predicates plugin's filters as one session `Predicate`."""

    def __init__(self, affinity: bool, taints: bool, ports: bool) -> None:
        self.affinity = affinity
        self.taints = taints
        self.ports = ports
        self.nodes: Sequence[Node] = []
        self.parts: list[FilterPart] = []  # pod affinity and spread, when some pod has such terms
    def _unschedulable(self, task: Task, node: Node) -> bool:
        return node.unschedulable and not task.placement.tolerates_unschedulable()

    def _ok(self, task: Task, node: Node) -> bool:
        if self._unschedulable(task, node):
            return False
        if self.affinity and not task.placement.matches_node(node.labels, node.name):
            return False
        return not (self.taints and task.placement.untolerated(node.taints))

    def static_mask(self, task: Task, idx: Index) -> Mask:
        return np.fromiter((self._ok(task, self.nodes[int(i)]) for i in idx), dtype=bool, count=len(idx))

    def dynamic_mask(self, task: Task, idx: Index) -> Mask | None:
        mask: Mask | None = None
        if self.ports and task.host_ports:
            mask = np.fromiter((not _port_conflict(task, self.nodes[int(i)]) for i in idx), dtype=bool,
                               count=len(idx))
        for part in self.parts:
            more = part.dynamic_mask(task, idx)
            if more is not None:
                mask = more if mask is None else mask & more
        return mask

    def unresolvable_mask(self, task: Task, idx: Index) -> Mask | None:
        mask: Mask | None = None
        for part in self.parts:
            more = part.unresolvable_mask(task, idx)
            if more is not None:
                mask = more if mask is None else mask | more
        return mask

    def explain(self, task: Task, node: Node) -> list[str]:
        reasons = []
        if self._unschedulable(task, node):
            reasons.append(REASON_UNSCHEDULABLE)
        if self.affinity and not task.placement.matches_node(node.labels, node.name):
            reasons.append(REASON_AFFINITY)
        if self.taints:
            for taint in task.placement.untolerated(node.taints):
                reasons.append(f"{REASON_TAINT} {{{taint.key}: {taint.value}}}")
        if self.ports and task.host_ports and _port_conflict(task, node):
            reasons.append(REASON_PORTS)
        for part in self.parts:
            reasons.extend(part.explain(task, node))
        return reasons


class PredicatesPlugin:
    name = "predicates"

    def __init__(self, args: PredicatesArgs) -> None:
        self.args = args
        self.filters = NodeFilters(affinity=args.affinity, taints=args.taints, ports=args.ports)

    def on_session_open(self, ssn: SessionView) -> None:
        self.filters.nodes = ssn.nodes
        self.filters.parts = open_filters(ssn, affinity=self.args.pod_affinity, spread=self.args.spread)
        ssn.add_predicate(self.filters)

    def on_session_close(self, ssn: SessionView) -> None:
        self.filters.parts = []


register_plugin("predicates", parse_arguments, PredicatesPlugin)
