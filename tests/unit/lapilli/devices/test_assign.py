"""Assignment annotations (Volcano's encodePodDevices / DecodePodDevices, GPUDevices.Allocate's annotations).

Ported: TestDecodeContainerDevicesRejectsInvalidUsage (utils_test.go): every row, the entries left out are also
named in the problems returned.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lapilli.devices.assign import CardUse, assignment_annotations, decode_pod_devices, encode_pod_devices, mig_id


@pytest.mark.parametrize(("text", "kept", "problems"), [
    ("GPU-0,NVIDIA,4096,30:", [CardUse("GPU-0", "NVIDIA", 4096, 30)], 0),
    ("GPU-0,NVIDIA,-5,30:", [], 1),
    ("GPU-0,NVIDIA,4096,-1:", [], 1),
    ("GPU-0,NVIDIA,abc,30:", [], 1),
    ("GPU-0,NVIDIA:", [], 1),
    ("GPU-0,NVIDIA,-5,30:GPU-1,NVIDIA,2048,10:", [CardUse("GPU-1", "NVIDIA", 2048, 10)], 1),
    ("GPU-0[g1-x],NVIDIA,5120,0:", [], 1),
])
def test_decode_keeps_what_it_can_read(text, kept, problems):
    devices, found = decode_pod_devices(text)
    assert list(devices[0]) == kept
    assert len(found) == problems


def test_containers_are_separated_by_semicolons():
    text = "GPU-0,NVIDIA,20480,0:GPU-1,NVIDIA,20480,0:;GPU-2,NVIDIA,1000,50:"
    devices, problems = decode_pod_devices(text)
    assert [len(c) for c in devices] == [2, 1] and not problems
    assert encode_pod_devices(devices) == text


def test_mig_ids():
    use = CardUse(mig_id("GPU-a", "group1", 3), "NVIDIA", 5120, 0)
    assert use.uuid == "GPU-a[group1-3]" and use.card_uuid == "GPU-a" and use.mig_slot() == ("group1", 3)
    assert CardUse("GPU-a", "NVIDIA", 1, 0).mig_slot() is None


uuids = st.from_regex(r"GPU-[0-9a-f]{4}(\[g[0-9]-[0-9]\])?", fullmatch=True)
uses = st.builds(CardUse, uuids, st.just("NVIDIA"), st.integers(0, 10**6), st.integers(0, 100))


@given(st.lists(st.lists(uses, min_size=1, max_size=4).map(tuple), min_size=1, max_size=3).map(tuple))
def test_round_trip(devices):
    assert decode_pod_devices(encode_pod_devices(devices)) == (devices, [])


def test_annotations_written_on_the_binding():
    devices = ((CardUse("GPU-0", "NVIDIA", 20480, 0),),)
    annotations = assignment_annotations("node-3", devices, 1700000000)
    assert annotations == {
        "volcano.sh/vgpu-node": "node-3",
        "volcano.sh/vgpu-time": "1700000000",
        "volcano.sh/vgpu-ids-new": "GPU-0,NVIDIA,20480,0:",
        "volcano.sh/devices-to-allocate": "GPU-0,NVIDIA,20480,0:",
        "volcano.sh/bind-phase": "allocating",
        "volcano.sh/bind-time": "1700000000",
    }
