"""A node's cards as the device plugin registers them: annotation `volcano.sh/node-vgpu-register`.

Counterpart: Volcano's `decodeNodeDevices` and `NewGPUDevices` (`pkg/scheduler/api/devices/nvidia/vgpu`) and the
plugin's `EncodeNodeDevices`. The value is `uuid,split,memMB,type,health,mode:` per card (a trailing `:` ends the
list); a node counts only when its allocatable has the count, core and memory resources, non-zero.

Strict where Volcano is lenient, on purpose: Volcano reads a missing number as 0 and an unreadable health as false
and keeps the card; here a card entry that cannot be read makes the whole annotation unusable (`ValueError` naming
the entry), and the caller ignores the node's cards with one warning, never guessing at a card's size.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from lapilli.devices.config import Geometry, NvidiaConfig
from lapilli.devices.names import HAMI_CORE, MIG, NODE_REGISTER


@dataclass(frozen=True, slots=True)
class Card:
    """One physical card: `split` is how many pods may share it, `memory` its MB, `mode` hami-core or mig."""

    index: int
    uuid: str
    split: int
    memory: int
    type: str
    health: bool
    mode: str


@dataclass(frozen=True, slots=True)
class NodeCards:
    """A node's cards, with the MIG geometries of each MIG card (empty for hami-core cards)."""

    node: str
    cards: tuple[Card, ...]
    geometries: tuple[tuple[Geometry, ...], ...]
    # Everything a fit reads of the cards except their UUIDs, as a small number: nodes of one shape fit alike.
    shape: int = -1

    @property
    def mode(self) -> str:
        """The node's sharing mode: Volcano takes the last card's (the device plugin gives all cards one mode)."""
        return self.cards[-1].mode if self.cards else HAMI_CORE


def sharing_mode(text: str) -> str:
    """`mig`, or hami-core for anything else (`mps` included, as Volcano's `getSharingMode`)."""
    return MIG if text == MIG else HAMI_CORE


def _bool(text: str) -> bool:
    # Go's strconv.ParseBool
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise ValueError(f"health {text!r} is not a boolean")


def _count(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"{what} {value} is negative")
    return value


def parse_register(text: str) -> tuple[Card, ...]:
    """The cards of a register annotation, in order; ValueError naming the first entry that cannot be read."""
    if ":" not in text:
        raise ValueError("no card entries (expected uuid,split,memMB,type,health,mode: per card)")
    cards: list[Card] = []
    for index, entry in enumerate(text.split(":")):
        if "," not in entry:
            if entry.strip():
                raise ValueError(f"card {index} {entry[:60]!r}: expected uuid,split,memMB,type,health,mode")
            continue
        items = entry.split(",")
        if len(items) < 6:
            raise ValueError(f"card {index} {entry[:60]!r}: {len(items)} fields, expected 6")
        try:
            uuid = items[0].strip()
            if not uuid:
                raise ValueError("empty uuid")
            cards.append(Card(index=len(cards), uuid=uuid, split=_count(items[1], "split"),
                              memory=_count(items[2], "memory"), type=items[3], health=_bool(items[4]),
                              mode=sharing_mode(items[5])))
        except ValueError as exc:
            raise ValueError(f"card {index} {entry[:60]!r}: {exc}") from None
    if len({c.uuid for c in cards}) != len(cards):
        raise ValueError("a card UUID appears twice")
    return tuple(cards)


def encode_register(cards: tuple[Card, ...] | list[Card]) -> str:
    """The annotation value for `cards` (the device plugin's format)."""
    return "".join(f"{c.uuid},{c.split},{c.memory},{c.type},{str(c.health).lower()},{c.mode}:" for c in cards)


def advertises(allocatable: Mapping[str, float], config: NvidiaConfig) -> bool:
    """The node's allocatable has the count, core and memory resources, non-zero (Volcano's NewGPUDevices)."""
    return all(allocatable.get(name, 0.0) > 0 for name in (config.count_name, config.core_name, config.memory_name))


_SHAPES: dict[tuple[object, ...], int] = {}
_NEXT_SHAPE = itertools.count()  # never reused, also after the table is emptied: a number means one shape


def _shape(cards: tuple[Card, ...], geometries: tuple[tuple[Geometry, ...], ...]) -> int:
    key = (tuple((c.split, c.memory, c.type, c.health, c.mode) for c in cards), geometries)
    found = _SHAPES.get(key)
    if found is None:
        if len(_SHAPES) >= 65_536:  # a bound, not an expectation: clusters have a handful of node shapes
            _SHAPES.clear()
        found = _SHAPES[key] = next(_NEXT_SHAPE)
    return found


_NO_GEOMETRIES: dict[int, tuple[tuple[Geometry, ...], ...]] = {}  # by card count: one per count, not per node


def node_cards(node: str, cards: tuple[Card, ...], config: NvidiaConfig) -> NodeCards:
    """The node's cards with MIG geometries resolved: a MIG card whose type the config knows no geometry for
    falls back to hami-core, as upstream does."""
    if all(c.mode != MIG for c in cards):
        geometries = _NO_GEOMETRIES.get(len(cards))
        if geometries is None:
            geometries = _NO_GEOMETRIES[len(cards)] = ((),) * len(cards)
        return NodeCards(node, cards, geometries, _shape(cards, geometries))
    resolved: list[Card] = []
    found_geometries: list[tuple[Geometry, ...]] = []
    for card in cards:
        found = config.geometries_for(card.type) if card.mode == MIG else None
        if card.mode == MIG and not found:
            card = Card(card.index, card.uuid, card.split, card.memory, card.type, card.health, HAMI_CORE)
        resolved.append(card)
        found_geometries.append(found or ())
    return NodeCards(node, tuple(resolved), tuple(found_geometries), _shape(tuple(resolved), tuple(found_geometries)))


def register_of(annotations: Mapping[str, str]) -> str | None:
    return annotations.get(NODE_REGISTER)


__all__ = ["Card", "NodeCards", "advertises", "encode_register", "node_cards", "parse_register", "register_of",
           "sharing_mode"]
