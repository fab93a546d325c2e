"""What a pod asks of cards (Volcano's ExtractResourceRequest) and the pod's card filters.

Ported: TestCheckGPUtype and TestCheckGPUUUID (utils_test.go), every row, against `DeviceAsk.type_ok` / `uuid_ok`
built from the same annotations; TestGetGPUMemoryOfPod (device_info_test.go) as the memory an ask takes. Left out:
TestGetPodGroupKey (the engine's job key is the PodGroup's `ns/name` from `scheduling.k8s.io/group-name`, tested
with the spread rows) and the "nil annotations map" row (a Python mapping is never nil).
"""

import pytest

from lapilli.devices.asks import NO_PERCENTAGE, container_ask, device_ask, matching_rules
from tests.unit.lapilli.devices.helpers import CONFIG, limits


@pytest.mark.parametrize(("annotations", "card_type", "ok"), [
    ({"nvidia.com/use-gputype": "NVIDIA"}, "NVIDIA", True),
    ({"nvidia.com/use-gputype": "nvidia"}, "NVIDIA", True),
    ({"nvidia.com/use-gputype": "AMD,NVIDIA,INTEL"}, "NVIDIA", True),
    ({"nvidia.com/use-gputype": "AMD,INTEL"}, "NVIDIA", False),
    ({"nvidia.com/nouse-gputype": "NVIDIA"}, "NVIDIA", False),
    ({"nvidia.com/nouse-gputype": "nvidia"}, "NVIDIA", False),
    ({"nvidia.com/nouse-gputype": "AMD,NVIDIA,INTEL"}, "NVIDIA", False),
    ({"nvidia.com/nouse-gputype": "AMD,INTEL"}, "NVIDIA", True),
    ({}, "NVIDIA", True),
    ({"nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "A100"}, "NVIDIA-A100", True),  # use wins
])
def test_type_filters(annotations, card_type, ok):
    found = device_ask([limits(number="1")], annotations, CONFIG)
    assert found is not None and found.type_ok(card_type) is ok


@pytest.mark.parametrize(("annotations", "uuid", "ok"), [
    ({}, "GPU-0", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "  "}, "GPU-0", True),
    ({"volcano.sh/vgpu-use-gpuuuid": ", ,"}, "GPU-0", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-0, GPU-1"}, "GPU-1", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-0,, GPU-1,"}, "GPU-1", True),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-10"}, "GPU-1", False),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-0,"}, "", False),
    ({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-0, GPU-1"}, "GPU-1", False),
    ({"volcano.sh/vgpu-nouse-gpuuuid": "GPU-0,"}, "", False),
    ({"volcano.sh/vgpu-use-gpuuuid": "GPU-1", "volcano.sh/vgpu-nouse-gpuuuid": "GPU-1"}, "GPU-1", False),
])
def test_uuid_filters(annotations, uuid, ok):
    found = device_ask([limits(number="1")], annotations, CONFIG)
    assert found is not None and found.uuid_ok(uuid) is ok


@pytest.mark.parametrize(("resources", "expected"), [
    (limits(number="2", memory="20480", cores="30"), (2, 20480, NO_PERCENTAGE, 30)),
    (limits(memory="4096"), (1, 4096, NO_PERCENTAGE, 0)),  # memory alone asks for one card
    (limits(number="1"), (1, 0, 100, 0)),  # neither memory nor percentage: the whole card's memory
    (limits(number="1", memory_percentage="50"), (1, 0, 50, 0)),
    (limits(cores="50"), None),  # cores alone ask for no card
    ({"cpu": 1000.0}, None),
])
def test_container_ask(resources, expected):
    found = container_ask(resources, CONFIG)
    assert (None if found is None else (found.nums, found.memory, found.percentage, found.cores)) == expected


def test_memory_an_ask_takes_of_a_card():
    assert container_ask(limits(number="1", memory="3000"), CONFIG).memory_on(16384) == 3000
    assert container_ask(limits(number="1", memory_percentage="50"), CONFIG).memory_on(16384) == 8192
    assert container_ask(limits(number="1"), CONFIG).memory_on(16384) == 16384


def test_renamed_resources():
    from lapilli.devices.config import parse_device_config

    config = parse_device_config("nvidia: {resourceCountName: nvidia.com/gpu, resourceMemoryName: nvidia.com/gpumem}")
    found = container_ask({"nvidia.com/gpu": 1000.0, "nvidia.com/gpumem": 3000_000.0}, config.nvidia)
    assert found is not None and (found.nums, found.memory) == (1, 3000)
    assert container_ask(limits(number="1"), config.nvidia) is None


def test_spread_keeps_the_group_only_with_the_policy():
    spread = device_ask([limits(number="1")], {"volcano.sh/vgpu-podgroup-policy": "spread"}, CONFIG, "ns/pg")
    plain = device_ask([limits(number="1")], {}, CONFIG, "ns/pg")
    assert spread is not None and spread.spread_group == "ns/pg"
    assert plain is not None and plain.spread_group == ""


def test_matching_rules():
    """Ported: TestPodMatchesRule and TestMatchingRules (gpuexclusive_test.go)."""
    rules = [{"app": "training", "team": "ml"}, {"workload": "inference"}]
    assert matching_rules({"app": "training", "team": "ml"}, rules) == {0}
    assert matching_rules({"app": "training", "team": "ml", "x": "y"}, rules) == {0}
    assert matching_rules({"app": "training"}, rules) == frozenset()
    assert matching_rules({"app": "training", "team": "ops"}, rules) == frozenset()
    assert matching_rules({"workload": "inference"}, rules) == {1}
    assert matching_rules({"app": "training", "team": "ml", "workload": "inference"}, rules) == {0, 1}
    assert matching_rules({}, rules) == frozenset()
