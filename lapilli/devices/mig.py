"""Choosing a MIG slice on a card (Volcano's `MIGFactory.TryAddPod`, `findMatch`, `pickFromGroup`).

A MIG card is cut by one geometry group at a time. An idle card tries the groups in the config's order and takes
the first that has a slice large enough, choosing that group's smallest such slice (the best fit: a 3 GB ask gets a
5 GB slice where the group has one). Once slices are in use the card keeps their group, and a new ask gets the
smallest free slice of it that is large enough. A slice is named by its position in the group: the count of all
slices of the kinds listed before its kind, plus its index among its kind (`getPosition`).

Difference from Volcano, on purpose: upstream, a card already in use offers only slice kinds that are in use on it
(a card of `3 × 2g.20gb + 1 × 1g.10gb` holding one 1g.10gb turns away a 15 GB ask with three 2g.20gb free); here every
kind of the card's group is offered. Upstream also keeps the card's group after its last slice is freed until the
scheduler restarts; here an idle card is free to take any group, as after a restart.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from lapilli.devices.config import Geometry


@dataclass(frozen=True, slots=True)
class Slice:
    group: int  # index of the geometry in the card's list
    position: int  # position in the group
    memory: int  # MB, as the config gives it


def first_position(geometry: Geometry, kind: int) -> int:
    """Position of the first slice of `kind` in the group."""
    return sum(t.count for t in geometry.instances[:kind])


def kind_of(geometry: Geometry, position: int) -> int | None:
    """Which kind of slice a position names (None when past the group's end)."""
    start = 0
    for kind, template in enumerate(geometry.instances):
        if position < start + template.count:
            return kind
        start += template.count
    return None


def _pick_in(geometry: Geometry, group: int, used: Collection[int], request: int) -> Slice | None:
    kinds = sorted(range(len(geometry.instances)), key=lambda k: (geometry.instances[k].memory, k))
    for kind in kinds:
        template = geometry.instances[kind]
        if template.memory < request:
            continue
        start = first_position(geometry, kind)
        for offset in range(template.count):
            if start + offset not in used:
                return Slice(group, start + offset, template.memory)
    return None


def pick_slice(geometries: Sequence[Geometry], group: int | None, used: Collection[int], request: int) -> Slice | None:
    """The slice for an ask of `request` MB on a card cut by `group` with positions `used` taken (`group` None:
    the card is idle), or None when no slice fits."""
    if group is not None:
        return _pick_in(geometries[group], group, used, request)
    for index, geometry in enumerate(geometries):
        found = _pick_in(geometry, index, (), request)
        if found is not None:
            return found
    return None


def group_index(geometries: Sequence[Geometry], name: str) -> int | None:
    for index, geometry in enumerate(geometries):
        if geometry.group == name:
            return index
    return None


__all__ = ["Slice", "first_position", "group_index", "kind_of", "pick_slice"]
