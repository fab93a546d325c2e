"""What a pod asks of cards, per container, and the pod annotations that narrow which cards may serve it.

Counterpart: Volcano's `devices.ExtractResourceRequest` and the filters of `checkNodeGPUSharingPredicateAndScore`
(`pkg/scheduler/api/devices/nvidia/vgpu/utils.go`). A container asks when its limits name the count resource
(`volcano.sh/vgpu-number`: that many cards) or only the memory resource (one card). Per card it asks `vgpu-memory`
MB, or `vgpu-memory-percentage` of each card's memory (which wins), or the whole card's memory when it names
neither; and `vgpu-cores` percent of the card's compute (100: a card of its own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lapilli.devices.config import NvidiaConfig
from lapilli.devices.names import (
    MODE,
    NOUSE_TYPE,
    NOUSE_UUID,
    NVIDIA,
    PODGROUP_POLICY,
    PODGROUP_SPREAD,
    USE_TYPE,
    USE_UUID,
)

NO_PERCENTAGE = 101  # Volcano's DefaultMemPercentage: "not given"


@dataclass(frozen=True, slots=True)
class ContainerAsk:
    """One asking container: `nums` cards, each with `memory` MB (or `percentage` of the card's memory when that
    is not NO_PERCENTAGE) and `cores` percent."""

    nums: int
    memory: int
    percentage: int
    cores: int
    type: str = NVIDIA

    def memory_on(self, card_memory: int) -> int:
        """MB this ask takes of a card with `card_memory` MB."""
        if self.percentage != NO_PERCENTAGE:
            return card_memory * self.percentage // 100
        return self.memory


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """A pod's card asks and the pod's card filters. Pods with equal asks and filters fit the same cards."""

    containers: tuple[ContainerAsk, ...]
    mode: str | None = None  # volcano.sh/vgpu-mode: only nodes in this mode
    use_types: tuple[str, ...] | None = None  # upper-cased; None when the pod does not say
    nouse_types: tuple[str, ...] | None = None
    allow: tuple[str, ...] = ()  # card UUIDs; empty: any
    deny: tuple[str, ...] = ()
    spread_group: str = ""  # "ns/podgroup" when the pod's group keeps to different cards
    rules: frozenset[int] = frozenset()  # exclusivity rules (deviceshare.GPUExclusiveRules) the pod matches
    # Where it fits depends on the cards' use alone: no UUID lists, no PodGroup spread, no exclusivity rule.
    plain: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain", not (self.allow or self.deny or self.spread_group or self.rules))

    def type_ok(self, card_type: str) -> bool:
        """Volcano's `checkGPUtype`: with use-gputype, the card type must contain one of them (any case);
        otherwise with nouse-gputype it must contain none."""
        upper = card_type.upper()
        if self.use_types is not None:
            return any(t in upper for t in self.use_types)
        if self.nouse_types is not None:
            return not any(t in upper for t in self.nouse_types)
        return True

    def uuid_ok(self, uuid: str) -> bool:
        """Allow list (when given) and deny list, exact; deny wins (Volcano's `gpuUUIDFilter`)."""
        if not uuid and (self.allow or self.deny):
            return False
        if self.allow and uuid not in self.allow:
            return False
        return uuid not in self.deny

    @property
    def filters_uuids(self) -> bool:
        return bool(self.allow or self.deny)


def _whole(units: float | None) -> int | None:
    """A Volcano scalar quantity (milli-units) as the whole number Volcano's `AsInt64` gives (fractions: none)."""
    if units is None:
        return None
    value = units / 1000.0
    return int(value) if value == int(value) else None


def container_ask(resources: Mapping[str, float], config: NvidiaConfig) -> ContainerAsk | None:
    """One container's ask from its limits (Volcano units), None when it asks for no card."""
    count = resources.get(config.count_name)
    if count is None and config.memory_name not in resources:
        return None
    nums = 1 if count is None else (_whole(count) or 0)
    memory = _whole(resources.get(config.memory_name)) or 0
    percentage = NO_PERCENTAGE
    if config.percentage_name and config.percentage_name in resources:
        percentage = _whole(resources[config.percentage_name]) or NO_PERCENTAGE
    if percentage == NO_PERCENTAGE and memory == 0:
        percentage = 100
    cores = _whole(resources.get(config.core_name)) or 0
    return ContainerAsk(nums=nums, memory=memory, percentage=percentage, cores=cores)


def _types(value: str | None) -> tuple[str, ...] | None:
    """A type list as Volcano compares it: upper-cased; an empty item matches every type, as upstream."""
    return None if value is None else tuple(v.strip().upper() for v in value.split(","))


def _uuids(value: str | None) -> tuple[str, ...]:
    """A UUID list: trimmed, empty items dropped (Volcano's `parseGPUUUIDList`)."""
    return tuple(v.strip() for v in (value or "").split(",") if v.strip())


def device_ask(containers: Sequence[Mapping[str, float]], annotations: Mapping[str, str], config: NvidiaConfig,
               group_key: str = "", rules: frozenset[int] = frozenset()) -> DeviceAsk | None:
    """The pod's ask (None when no container asks for a card). `group_key` is the pod's `ns/podgroup`."""
    asks = tuple(a for a in (container_ask(c, config) for c in containers) if a is not None)
    if not asks:
        return None
    use = _types(annotations.get(USE_TYPE))
    spread = annotations.get(PODGROUP_POLICY) == PODGROUP_SPREAD and bool(group_key)
    return DeviceAsk(
        containers=asks,
        mode=annotations.get(MODE) or None,
        use_types=use,
        nouse_types=None if use is not None else _types(annotations.get(NOUSE_TYPE)),
        allow=_uuids(annotations.get(USE_UUID)),
        deny=_uuids(annotations.get(NOUSE_UUID)),
        spread_group=group_key if spread else "",
        rules=rules,
    )


def matching_rules(labels: Mapping[str, str], rules: Sequence[Mapping[str, str]]) -> frozenset[int]:
    """Indices of the exclusivity rules whose every label the pod carries with that value."""
    return frozenset(i for i, rule in enumerate(rules) if rule and all(labels.get(k) == v for k, v in rule.items()))


__all__ = ["NO_PERCENTAGE", "ContainerAsk", "DeviceAsk", "container_ask", "device_ask", "matching_rules"]
