"""The device config (Volcano's pkg/scheduler/api/devices/config).

Ported: TestParseDeviceConfig (config_test.go): the same YAML gives the same resource names, defaults and MIG
geometries. Left out: TestParseVNPUs* (Ascend vNPU configs; Lapilli does not schedule vNPUs).
"""

import pytest

from lapilli.devices.config import DEFAULT_CONFIG, config_from_configmap, parse_device_config

VOLCANO_CONFIG = """nvidia:
  resourceCountName: volcano.sh/vgpu-number
  resourceMemoryName: volcano.sh/vgpu-memory
  resourceMemoryPercentageName: volcano.sh/vgpu-memory-percentage
  resourceCoreName: volcano.sh/vgpu-cores
  overwriteEnv: false
  defaultMemory: 0
  defaultCores: 0
  defaultGPUNum: 1
  deviceSplitCount: 10
  deviceMemoryScaling: 1
  deviceCoreScaling: 1
  gpuMemoryFactor: 1
  knownMigGeometries:
  - models: [ "A30" ]
    allowedGeometries:
      - group: group1
        geometries:
        - {name: 1g.6gb, memory: 6144, count: 4}
      - group: group2
        geometries:
        - {name: 2g.12gb, memory: 12288, count: 2}
      - group: group3
        geometries:
        - {name: 4g.24gb, memory: 24576, count: 1}
  - models: [ "A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB", "A100-SXM4-40GB" ]
    allowedGeometries:
      - group: "group1"
        geometries:
        - {name: 1g.5gb, memory: 5120, count: 7}
      - group: "group2"
        geometries:
        - {name: 2g.10gb, memory: 10240, count: 3}
        - {name: 1g.5gb, memory: 5120, count: 1}
"""


def test_parse_volcano_config():
    config = parse_device_config(VOLCANO_CONFIG).nvidia
    assert (config.count_name, config.memory_name, config.core_name, config.percentage_name) == (
        "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores",
        "volcano.sh/vgpu-memory-percentage")
    assert (config.split_count, config.default_gpu_num, config.gpu_memory_factor) == (10, 1, 1)
    a30 = config.geometries_for("NVIDIA-A30")
    assert a30 is not None and [g.group for g in a30] == ["group1", "group2", "group3"]
    assert [(t.name, t.memory, t.count) for t in a30[0].instances] == [("1g.6gb", 6144, 4)]
    a100 = config.geometries_for("NVIDIA-A100-SXM4-40GB")
    assert a100 is not None and [(t.name, t.count) for t in a100[1].instances] == [("2g.10gb", 3), ("1g.5gb", 1)]
    assert config.geometries_for("NVIDIA-H100") is None


def test_defaults_are_volcanos():
    config = DEFAULT_CONFIG.nvidia
    assert (config.count_name, config.memory_name, config.core_name) == (
        "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
    assert (config.split_count, config.memory_scaling, config.core_scaling, config.default_gpu_num) == (10, 1, 1, 1)


def test_renamed_resources_and_keys_left_out_keep_their_default():
    config = parse_device_config("nvidia:\n  resourceCountName: nvidia.com/gpu\n  resourceMemoryName: nvidia.com/gpumem\n")
    assert (config.nvidia.count_name, config.nvidia.memory_name) == ("nvidia.com/gpu", "nvidia.com/gpumem")
    assert config.nvidia.core_name == "volcano.sh/vgpu-cores"
    assert parse_device_config("") == DEFAULT_CONFIG


@pytest.mark.parametrize(("text", "message"), [
    ("nvidia: [", "is not YAML"),
    ("- a", "expected a mapping"),
    ("nvidia: {deviceSplitCount: -1}", "deviceSplitCount"),
    ("nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: [{group: g, geometries: [{name: x}]}]}]}",
     "memory"),
    ("nvidia: {resourceCountName: ''}", "resourceCountName"),
])
def test_bad_config_is_one_line(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_device_config(text)
    assert "\n" not in str(info.value)


def test_configmap_without_the_key():
    with pytest.raises(ValueError, match=r"device-config\.yaml"):
        config_from_configmap({"other": "x"})
