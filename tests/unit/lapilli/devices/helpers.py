"""Small builders for the device model's tests (Volcano's `makeGPUDevices` / `makeVGPUPod`)."""

from __future__ import annotations

from assembly.dev.vgpu import DEVICE_CONFIG
from lapilli.devices.asks import ContainerAsk, DeviceAsk, device_ask
from lapilli.devices.cards import CardLedger
from lapilli.devices.config import DEFAULT_CONFIG, NvidiaConfig
from lapilli.devices.register import Card, node_cards

CONFIG = DEFAULT_CONFIG.nvidia
# The device plugin's knownMigGeometries for the A100 models (A100-40GB: group1 7 × 1g.5gb, group2 3 × 2g.10gb +
# 1 × 1g.5gb, group3 2 × 3g.20gb, group4 1 × 7g.40gb), as `lapilli dev up --vgpu` creates it.
A100_40GB_MIG = DEVICE_CONFIG


def ledger(cards: int = 2, memory: int = 16384, split: int = 4, *, mode: str = "hami-core",
           card_type: str = "NVIDIA", config: NvidiaConfig = CONFIG, healthy: bool = True) -> CardLedger:
    """A node of `cards` cards named GPU-0000A, GPU-0000B, … as Volcano's tests name them."""
    made = tuple(Card(i, f"GPU-0000{chr(ord('A') + i)}", split, memory, card_type, healthy, mode) for i in range(cards))
    return CardLedger(node_cards("node-1", made, config))


def ask(memory: int = 4096, nums: int = 1, cores: int = 25, **filters: object) -> DeviceAsk:
    return DeviceAsk(containers=(ContainerAsk(nums=nums, memory=memory, percentage=101, cores=cores),),
                     **filters)  # type: ignore[arg-type]


def limits(**named: str) -> dict[str, float]:
    """A container's limits in Volcano units, keyed by the last part of the vGPU resource name."""
    return {f"volcano.sh/vgpu-{k.replace('_', '-')}": float(v) * 1000 for k, v in named.items()}


def pod_ask(annotations: dict[str, str] | None = None, group: str = "", **named: str) -> DeviceAsk:
    found = device_ask([limits(**named)], annotations or {}, CONFIG, group)
    assert found is not None
    return found
