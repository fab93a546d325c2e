"""What a snapshot keeps of a node's cards and of a pod's device asks, before any device config is known.

The engine's snapshot is built from Kubernetes objects once per change; the device config (which resource names ask
for cards, the MIG geometries) comes with the scheduler conf's ConfigMap and may change on its own. So the snapshot
keeps the raw facts — a node's registered cards (or why its annotation cannot be read), a pod's extended-resource
limits per container, its device annotations and labels, and the assignment it carries — and the deviceshare plugin
reads them with the config at session open.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
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

# The pod annotations an ask reads, and those a fit or an assignment reads.
ASK_KEYS: Final = (MODE, USE_TYPE, NOUSE_TYPE, USE_UUID, NOUSE_UUID, PODGROUP_POLICY)
POD_KEYS: Final = (*ASK_KEYS, ASSIGNED_IDS, ASSIGNED_NODE, BIND_PHASE)


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
    counted). `ask_key`: the containers' limits and the annotations an ask reads, hashable: pods with equal keys
    (one template's) make equal asks under any device config, so a session reads each template once; equal keys
    are mostly one object (interned), which is cheaper to look up."""

    containers: tuple[Mapping[str, float], ...]
    annotations: Mapping[str, str]
    labels: Mapping[str, str]
    assigned: PodDevices | None = None
    assigned_node: str = ""
    problem: str = ""
    ask_key: Hashable = None

    def with_assignment(self, node: str, devices: PodDevices) -> PodDeviceFacts:
        """The same pod, as if it carried `devices` on `node` (a planned pod assumed placed)."""
        return PodDeviceFacts(self.containers, self.annotations, self.labels, devices, node, ask_key=self.ask_key)


# Pods of one template share one `ask_key` object, so a session can tell them apart by identity.
_ASK_KEYS: dict[Hashable, Hashable] = {}
ASK_KEYS_KEPT: Final = 4096


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
    read: Hashable = (tuple(tuple(sorted(c.items())) for c in containers), tuple((k, kept.get(k)) for k in ASK_KEYS))
    if len(_ASK_KEYS) >= ASK_KEYS_KEPT:
        _ASK_KEYS.clear()
    ask_key = _ASK_KEYS.setdefault(read, read)
    return PodDeviceFacts(containers, kept, {str(k): str(v) for k, v in labels.items()}, devices,
                          kept.get(ASSIGNED_NODE, ""), problem, ask_key)


__all__ = ["ASK_KEYS", "NO_CARDS", "POD_KEYS", "NodeCardFacts", "PodDeviceFacts", "node_card_facts", "pod_device_facts"]
