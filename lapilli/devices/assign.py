"""A pod's card assignment and the annotations that carry it to the device plugin.

Counterpart: Volcano's `encodePodDevices` / `DecodePodDevices` and the annotations of `GPUDevices.Allocate`
(`pkg/scheduler/api/devices/nvidia/vgpu`). `volcano.sh/vgpu-ids-new` (and, at first, the same text in
`volcano.sh/devices-to-allocate`) lists `uuid,type,memMB,cores:` per card, one `;`-separated part per container
that asks for cards, in container order; a MIG slice's uuid is `<card uuid>[<group>-<position>]`.

Decoding keeps what it can read, as Volcano's does: an entry that cannot be read (too few fields, a memory or core
count that is not a non-negative integer, a damaged MIG id) is left out and named in the problems returned beside
the assignment, so the cards it does name are still counted and the caller can warn about the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, TypeAlias

from lapilli.devices.names import (
    ASSIGNED_IDS,
    ASSIGNED_NODE,
    ASSIGNED_TIME,
    BIND_ALLOCATING,
    BIND_PHASE,
    BIND_TIME,
    DEVICES_TO_ALLOCATE,
)


class CardUse(NamedTuple):
    """One card (or MIG slice) given to a container: its id, the ask's device type, MB and percent of compute. (A
    named tuple: a session makes one per pod placed, and a frozen dataclass costs twice as much to make.)"""

    uuid: str
    type: str
    memory: int
    cores: int

    @property
    def card_uuid(self) -> str:
        """The physical card's UUID (a MIG slice's id without its `[group-position]`)."""
        return self.uuid.split("[", 1)[0]

    def mig_slot(self) -> tuple[str, int] | None:
        """(group, position) of a MIG slice id, None for a whole-card id; ValueError if the brackets are damaged."""
        if "[" not in self.uuid:
            return None
        inside = self.uuid.split("[", 1)[1]
        if not inside.endswith("]"):
            raise ValueError(f"MIG id {self.uuid!r} has no closing bracket")
        group, sep, position = inside[:-1].rpartition("-")
        if not sep or not group or not position.isdigit():
            raise ValueError(f"MIG id {self.uuid!r} is not <uuid>[<group>-<position>]")
        return group, int(position)


PodDevices: TypeAlias = tuple[tuple[CardUse, ...], ...]
"""Per asking container, its cards."""


def mig_id(uuid: str, group: str, position: int) -> str:
    return f"{uuid}[{group}-{position}]"


def encode_pod_devices(devices: PodDevices) -> str:
    return ";".join("".join(f"{d.uuid},{d.type},{d.memory},{d.cores}:" for d in container) for container in devices)


def _number(text: str, what: str) -> int:
    if not text.isdigit():
        raise ValueError(f"{what} {text!r} is not a non-negative integer")
    return int(text)


def _entry(entry: str) -> CardUse:
    items = entry.split(",")
    if len(items) < 4:
        raise ValueError(f"{len(items)} fields, expected uuid,type,mem,cores")
    if not items[0]:
        raise ValueError("empty uuid")
    use = CardUse(items[0], items[1], _number(items[2], "memory"), _number(items[3], "cores"))
    use.mig_slot()  # a damaged MIG id is left out here, not when its slice is counted
    return use


def decode_pod_devices(text: str) -> tuple[PodDevices, list[str]]:
    """The assignment an annotation holds, and one line per entry left out because it cannot be read."""
    if not text:
        return (), []
    containers: list[tuple[CardUse, ...]] = []
    problems: list[str] = []
    for part in text.split(";"):
        cards: list[CardUse] = []
        for entry in part.split(":"):
            if "," not in entry:
                continue  # the separator's empty tail, as upstream
            try:
                cards.append(_entry(entry))
            except ValueError as exc:
                problems.append(f"card entry {entry[:80]!r}: {exc}")
        containers.append(tuple(cards))
    return tuple(containers), problems


def assignment_annotations(node: str, devices: PodDevices, unix_time: int) -> dict[str, str]:
    """What the scheduler writes with the Binding (Volcano's `GPUDevices.Allocate`): the node, the cards twice
    (one copy for the device plugin to consume), the time of the decision and `bind-phase: allocating`."""
    ids = encode_pod_devices(devices)
    return {
        ASSIGNED_NODE: node,
        ASSIGNED_TIME: str(unix_time),
        ASSIGNED_IDS: ids,
        DEVICES_TO_ALLOCATE: ids,
        BIND_PHASE: BIND_ALLOCATING,
        BIND_TIME: str(unix_time),
    }


def assigned(annotations: Mapping[str, str]) -> tuple[PodDevices | None, list[str]]:
    """The pod's assignment (None when it has none) and the entries of it that could not be read."""
    text = annotations.get(ASSIGNED_IDS)
    return (None, []) if text is None else decode_pod_devices(text)


__all__ = ["CardUse", "PodDevices", "assigned", "assignment_annotations", "decode_pod_devices",
           "encode_pod_devices", "mig_id"]
