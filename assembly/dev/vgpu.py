"""`lapilli dev up --vgpu`: simulated nodes with shared GPUs, as a cluster running the HAMi vGPU device plugin.

Every node registers its cards (`volcano.sh/node-vgpu-register`) and their totals in allocatable, and has no whole
`nvidia.com/gpu`: three nodes of four carry A100-80GB cards in hami-core mode (memory and compute shared by up to 10
pods a card), every fourth A100-40GB cards in MIG mode. The device config (`volcano-vgpu-device-config` in
`kube-system`, as the device plugin generates it) gives the MIG geometries of both models, and the service runs
examples/scheduler-conf-vgpu.yaml (deviceshare with `VGPUEnable`, binpacking cards), which is also put where an
installed Lapilli keeps its conf (`lapilli-system/lapilli-scheduler-conf`) for `job why` and the dashboard.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Final

from assembly.dev.nodes import CardShape, NodeShape
from assembly.why.gather import CONF_CONFIGMAP_NAME, CONF_CONFIGMAP_NAMESPACE, CONF_KEY
from lapilli.devices.names import CONFIG_KEY, CONFIG_MAP, CONFIG_NAMESPACE, MIG
from lapilli.kube import KubeClient
from lapilli.kube.resources import CONFIG_MAPS

VGPU_CONF: Final = Path(__file__).resolve().parents[2] / "examples" / "scheduler-conf-vgpu.yaml"
MIG_EVERY: Final = 4  # every fourth node (index 3, 7, …) has MIG cards
# knownMigGeometries of the two A100 models, as the device plugin's default device config lists them.
DEVICE_CONFIG: Final = """nvidia:
  resourceCountName: volcano.sh/vgpu-number
  resourceMemoryName: volcano.sh/vgpu-memory
  resourceMemoryPercentageName: volcano.sh/vgpu-memory-percentage
  resourceCoreName: volcano.sh/vgpu-cores
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  knownMigGeometries:
  - models: [A100-SXM4-40GB, A100-40GB-PCIe, A100-PCIE-40GB]
    allowedGeometries:
    - group: group1
      geometries: [{name: 1g.5gb, memory: 5120, count: 7}]
    - group: group2
      geometries: [{name: 2g.10gb, memory: 10240, count: 3}, {name: 1g.5gb, memory: 5120, count: 1}]
    - group: group3
      geometries: [{name: 3g.20gb, memory: 20480, count: 2}]
    - group: group4
      geometries: [{name: 7g.40gb, memory: 40960, count: 1}]
  - models: [A100-SXM4-80GB, A100-80GB-PCIe, A100-PCIE-80GB]
    allowedGeometries:
    - group: group1
      geometries: [{name: 1g.10gb, memory: 10240, count: 7}]
    - group: group2
      geometries: [{name: 2g.20gb, memory: 20480, count: 3}, {name: 1g.10gb, memory: 10240, count: 1}]
    - group: group3
      geometries: [{name: 3g.40gb, memory: 40960, count: 2}]
    - group: group4
      geometries: [{name: 7g.79gb, memory: 80896, count: 1}]
"""


def hami_cards(count: int) -> CardShape:
    return CardShape(count)


def mig_cards(count: int) -> CardShape:
    return CardShape(count, memory=40960, type="NVIDIA-A100-SXM4-40GB", mode=MIG, split=7)


def vgpu_shape(shape: NodeShape, index: int) -> NodeShape:
    """Node `index`'s shape: the cards of `shape.gpus` whole GPUs, MIG on every fourth node."""
    count = shape.gpus or 8
    cards = mig_cards(count) if index % MIG_EVERY == MIG_EVERY - 1 else hami_cards(count)
    return replace(shape, gpus=0, cards=cards)


def device_configmap() -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIG_MAP, "namespace": CONFIG_NAMESPACE}, "data": {CONFIG_KEY: DEVICE_CONFIG}}


def scheduler_conf_configmap(conf: Path) -> dict[str, object]:
    """The conf the service runs, where an installed Lapilli keeps it: so `lapilli job why`, `queue list` and the
    dashboard explain with deviceshare, as the scheduler decides."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONF_CONFIGMAP_NAME, "namespace": CONF_CONFIGMAP_NAMESPACE},
            "data": {CONF_KEY: conf.read_text()}}


async def create_device_config(client: KubeClient, conf: Path = VGPU_CONF) -> None:
    """The device config (before the kubelet starts: it reads the MIG geometries from it, as the device plugin)
    and the ConfigMap of the scheduler conf `conf` the service runs."""
    await client.create(CONFIG_MAPS, device_configmap(), CONFIG_NAMESPACE)
    await client.create(CONFIG_MAPS, scheduler_conf_configmap(conf), CONF_CONFIGMAP_NAMESPACE)


__all__ = ["DEVICE_CONFIG", "MIG_EVERY", "VGPU_CONF", "create_device_config", "device_configmap", "hami_cards",
           "mig_cards", "vgpu_shape"]
