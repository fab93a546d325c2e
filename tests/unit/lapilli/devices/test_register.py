"""A node's registered cards (Volcano's decodeNodeDevices, the device plugin's EncodeNodeDevices)."""

import pytest

from lapilli.devices.config import parse_device_config
from lapilli.devices.facts import node_card_facts
from lapilli.devices.register import Card, advertises, encode_register, node_cards, parse_register

TWO = "GPU-a,10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:GPU-b,4,40960,NVIDIA-A100-SXM4-40GB,false,mig:"


def test_parse_and_encode_round_trip():
    cards = parse_register(TWO)
    assert cards == (Card(0, "GPU-a", 10, 81920, "NVIDIA-A100-SXM4-80GB", True, "hami-core"),
                     Card(1, "GPU-b", 4, 40960, "NVIDIA-A100-SXM4-40GB", False, "mig"))
    assert encode_register(cards) == TWO
    assert parse_register(encode_register(cards)) == cards


def test_mps_is_scheduled_as_hami_core():
    assert parse_register("GPU-a,10,100,NVIDIA,true,mps:")[0].mode == "hami-core"


@pytest.mark.parametrize(("text", "message"), [
    ("GPU-a,10,81920", "no card entries"),
    ("GPU-a,10,81920,NVIDIA:", "4 fields"),
    ("GPU-a,ten,81920,NVIDIA,true,hami-core:", "split 'ten'"),
    ("GPU-a,10,-1,NVIDIA,true,hami-core:", "memory -1 is negative"),
    ("GPU-a,10,100,NVIDIA,maybe,hami-core:", "health 'maybe'"),
    (",10,100,NVIDIA,true,hami-core:", "empty uuid"),
    ("GPU-a,10,100,NVIDIA,true,hami-core:GPU-a,10,100,NVIDIA,true,hami-core:", "twice"),
    ("GPU-a,10,100,NVIDIA,true,hami-core:garbage:", "card 1"),
])
def test_unreadable_annotation_names_the_entry(text, message):
    with pytest.raises(ValueError, match=message):
        parse_register(text)


def test_node_facts_keep_the_problem_instead_of_raising():
    facts = node_card_facts({"volcano.sh/node-vgpu-register": "GPU-a,x,1,NVIDIA,true,hami-core:"})
    assert facts.cards == () and "split 'x'" in facts.problem
    assert node_card_facts({}).cards == () and node_card_facts({}).problem == ""


def test_mig_card_without_known_geometry_falls_back_to_hami_core():
    config = parse_device_config(
        "nvidia: {knownMigGeometries: [{models: [A100-SXM4-40GB], allowedGeometries: "
        "[{group: g1, geometries: [{name: 1g.5gb, memory: 5120, count: 7}]}]}]}").nvidia
    cards = parse_register("GPU-a,7,40960,NVIDIA-A100-SXM4-40GB,true,mig:GPU-b,7,40960,NVIDIA-H100,true,mig:")
    node = node_cards("n", cards, config)
    assert [c.mode for c in node.cards] == ["mig", "hami-core"]
    assert node.geometries[0][0].group == "g1" and node.geometries[1] == ()
    assert node.mode == "hami-core"  # the last card's, as upstream


def test_a_node_counts_only_with_count_cores_and_memory_allocatable():
    config = parse_device_config("").nvidia
    full = {"volcano.sh/vgpu-number": 20000.0, "volcano.sh/vgpu-memory": 1e6, "volcano.sh/vgpu-cores": 2e5}
    assert advertises(full, config)
    assert not advertises({**full, "volcano.sh/vgpu-cores": 0.0}, config)
    assert not advertises({k: v for k, v in full.items() if k != "volcano.sh/vgpu-memory"}, config)
