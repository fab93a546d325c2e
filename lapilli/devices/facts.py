"""What a snapshot keeps of a node's cards and of a pod's device asks, before any device config is known.

The engine's snapshot is built from Kubernetes objects once per change; the device config (which resource names ask
for cards, the MIG geometries) comes with the scheduler conf's ConfigMap and may change on its own. So the snapshot
keeps the raw facts — a node's registered cards (or why its annotation cannot be read), a pod's extended-resource
limits per container, its device annotations and labels, and the assignment it carries — and the deviceshare plugin
reads them with the config at session open.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from lapilli.devices.assign import PodDevices, assigned
from lapilli.devices.names import (
    ASSIGNED_IDS,
    ASSIGNED_NODE,
    BIND_PHASE,
    MODE,
    NODE_REGISTER,
    NOUSE_TYPE,
    NOUSE_UUID,
    PODGROUP_POLICY,
    USE_TYPE,
    USE_UUID,
)
from lapilli.devices.register import Card, parse_register
from lapilli.resources.units import resource_list_units

# The pod annotations a fit or an assignment reads.
POD_KEYS: Final = (MODE, USE_TYPE, NOUSE_TYPE, USE_UUID, NOUSE_UUID, PODGROUP_POLICY, ASSIGNED_IDS, ASSIGNED_NODE,
                   BIND_PHASE)


@dataclass(frozen=True, slots=True)
class NodeCardFacts:
    """A node's registered cards; `problem` says why the register annotation could not be read (then no cards)."""

    cards: tuple[Card, ...] = ()
    problem: str = ""


NO_CARDS: Final = NodeCardFacts()


def node_card_facts(annotations: Mapping[str, Any]) -> NodeCardFacts:
    text = annotations.get(NODE_REGISTER)
    if text is None:
        return NO_CARDS
    if not isinstance(text, str):
        return NodeCardFacts(problem=f"{NODE_REGISTER} is not a string")
    try:
        return NodeCardFacts(cards=parse_register(text))
    except ValueError as exc:
        return NodeCardFacts(problem=f"{NODE_REGISTER}: {exc}")


@dataclass(frozen=True, slots=True)
class PodDeviceFacts:
    """A pod's extended-resource limits per regular container (Volcano units), its device annotations and labels,
    and the assignment it carries (`problem`: the entries of its annotation that could not be read and are not
    counted)."""

    containers: tuple[Mapping[str, float], ...]
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    assigned: PodDevices | None = None
    assigned_node: str = ""
    problem: str = ""

    def with_assignment(self, node: str, devices: PodDevices) -> PodDeviceFacts:
        """The same pod, as if it carried `devices` on `node` (a planned pod assumed placed)."""
        return PodDeviceFacts(self.containers, self.annotations, self.labels, devices, node)


def _extended(container: Mapping[str, Any]) -> dict[str, float]:
    resources = container.get("resources") or {}
    merged = {k: v for k, v in (resources.get("requests") or {}).items() if "/" in k}
    merged.update({k: v for k, v in (resources.get("limits") or {}).items() if "/" in k})
    return resource_list_units(merged) if merged else {}


def pod_device_facts(spec: Mapping[str, Any], annotations: Mapping[str, Any],
                     labels: Mapping[str, Any]) -> PodDeviceFacts | None:
    """The facts of a pod that asks for an extended resource or carries device annotations; None otherwise.
    Raises ValueError for a quantity that cannot be read (the pod's request parse has refused it already)."""
    containers = tuple(_extended(c) for c in spec.get("containers") or [])
    kept = {k: str(annotations[k]) for k in POD_KEYS if k in annotations}
    if not kept and not any(containers):
        return None
    devices, problems = assigned(kept)
    problem = f"{ASSIGNED_IDS}: {'; '.join(problems)}" if problems else ""
    return PodDeviceFacts(containers, kept, {str(k): str(v) for k, v in labels.items()}, devices,
                          kept.get(ASSIGNED_NODE, ""), problem)


__all__ = ["NO_CARDS", "POD_KEYS", "NodeCardFacts", "PodDeviceFacts", "node_card_facts", "pod_device_facts"]
