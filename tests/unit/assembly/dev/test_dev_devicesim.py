"""The simulated vGPU device plugin the kubelet runs: a starting pod's cards are checked against the node's
registered cards and what its running pods hold; a wrong assignment is refused, never run."""

from __future__ import annotations

from typing import Any

import pytest

from assembly.dev.devicesim import CardAdmission
from assembly.dev.nodes import NodeShape, node_object, slim_node
from assembly.dev.podsim import rejected_patch, slim_pod
from assembly.dev.vgpu import DEVICE_CONFIG, MIG_EVERY, hami_cards, mig_cards, vgpu_shape
from lapilli.devices.config import parse_device_config
from lapilli.devices.names import NODE_REGISTER
from lapilli.devices.register import parse_register

CONFIG = parse_device_config(DEVICE_CONFIG).nvidia


def _node(name: str = "n0", mig: bool = False) -> dict[str, Any]:
    cards = mig_cards(2) if mig else hami_cards(2)
    return slim_node(node_object(name, NodeShape(gpus=0, cards=cards), 0))


def _pod(name: str, ids: str | None, node: str = "n0", limits: dict[str, str] | None = None) -> dict[str, Any]:
    annotations = {} if ids is None else {"volcano.sh/vgpu-ids-new": ids, "volcano.sh/vgpu-node": node,
                                          "volcano.sh/devices-to-allocate": ids}
    limits = limits if limits is not None else {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "40960"}
    return slim_pod({"metadata": {"name": name, "namespace": "ml", "uid": name, "annotations": annotations},
                     "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]},
                     "status": {"phase": "Pending"}})


def test_the_node_registers_its_cards_and_their_totals():
    node = node_object("n0", NodeShape(gpus=0, cards=hami_cards(8)), 0)
    cards = parse_register(node["metadata"]["annotations"][NODE_REGISTER])
    assert len(cards) == 8 and {c.memory for c in cards} == {81920} and cards[0].uuid == "GPU-n0-0"
    assert node["status"]["allocatable"]["volcano.sh/vgpu-memory"] == str(8 * 81920)
    assert node["status"]["allocatable"]["volcano.sh/vgpu-number"] == "80"
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    assert [vgpu_shape(NodeShape(), i).cards.mode for i in range(MIG_EVERY)] == ["hami-core"] * 3 + ["mig"]


def test_cards_are_given_while_they_have_room_then_refused():
    admission, node = CardAdmission(CONFIG), _node()
    assert admission.refusal(_pod("a", "GPU-n0-0,NVIDIA,40960,0:"), node) is None
    assert admission.refusal(_pod("b", "GPU-n0-0,NVIDIA,40960,0:"), node) is None
    refused = admission.refusal(_pod("c", "GPU-n0-0,NVIDIA,40960,0:"), node)
    assert refused is not None and "would hold 122880 MB of 81920" in refused
    admission.stopped("ml/a", "n0")
    assert admission.refusal(_pod("c", "GPU-n0-0,NVIDIA,40960,0:"), node) is None


@pytest.mark.parametrize(("pod", "message"), [
    (_pod("x", None), "carries no assignment"),
    (_pod("x", "GPU-other,NVIDIA,1,0:"), "not registered on node n0"),
    (_pod("x", "GPU-n0-0,NVIDIA,1,0:", node="n9"), "assigned on node n9"),
    (_pod("x", "GPU-n0-0,NVIDIA,1,0:GPU-n0-1,NVIDIA,1,0:"), "ask for [1] cards, the assignment gives [2]"),
    (_pod("x", "GPU-n0-0,NVIDIA,lots,0:"), "not a non-negative integer"),
])
def test_wrong_assignments_are_refused(pod, message):
    refused = CardAdmission(CONFIG).refusal(pod, _node())
    assert refused is not None and message in refused


def test_a_mig_slice_is_given_once():
    admission, node = CardAdmission(CONFIG), _node(mig=True)
    limits = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"}
    assert admission.refusal(_pod("a", "GPU-n0-0[group1-0],NVIDIA,5120,0:", limits=limits), node) is None
    refused = admission.refusal(_pod("b", "GPU-n0-0[group1-0],NVIDIA,5120,0:", limits=limits), node)
    assert refused is not None and "already in use" in refused


def test_pods_without_cards_start_and_running_pods_count():
    admission, node = CardAdmission(CONFIG), _node()
    assert admission.refusal(_pod("plain", None, limits={"cpu": "1"}), node) is None
    admission.running(_pod("old", "GPU-n0-1,NVIDIA,81920,0:"), "n0")
    assert admission.refusal(_pod("new", "GPU-n0-1,NVIDIA,40960,0:"), node) is not None


def test_refusal_patch():
    assert rejected_patch({"metadata": {"uid": "u"}}, reason="UnexpectedAdmissionError", message="m") == {
        "metadata": {"uid": "u"}, "status": {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": "m"}}
