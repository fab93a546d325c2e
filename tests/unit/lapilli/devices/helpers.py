"""Small builders for the device model's tests (Volcano's `makeGPUDevices` / `makeVGPUPod`)."""

from __future__ import annotations

from lapilli.devices.asks import ContainerAsk, DeviceAsk, device_ask
from lapilli.devices.cards import CardLedger
from lapilli.devices.config import DEFAULT_CONFIG, NvidiaConfig
from lapilli.devices.register import Card, node_cards

CONFIG = DEFAULT_CONFIG.nvidia
# The A100-40GB entry of the device plugin's knownMigGeometries (three of its groups).
A100_40GB_MIG = """nvidia:
  knownMigGeometries:
  - models: [A100-SXM4-40GB]
    allowedGeometries:
    - group: group1
      geometries: [{name: 1g.5gb, memory: 5120, count: 7}]
    - group: group2
      geometries: [{name: 2g.10gb, memory: 10240, count: 3}, {name: 1g.5gb, memory: 5120, count: 1}]
    - group: group3
      geometries: [{name: 3g.20gb, memory: 20480, count: 2}]
"""


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
