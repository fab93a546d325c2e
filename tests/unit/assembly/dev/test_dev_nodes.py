"""Simulated node objects and the flags that shape them."""

from __future__ import annotations

import pytest

from assembly.dev.nodes import (
    NodeShape,
    csinode_object,
    is_ready,
    kept_taints,
    node_name,
    node_object,
    parse_label,
    parse_taint,
    pod_cidr,
    slim_node,
)


def test_parse_label_and_taint():
    assert parse_label("zone=a") == ("zone", "a")
    assert parse_label("flag=") == ("flag", "")
    assert parse_taint("gpu=true:NoSchedule") == {"key": "gpu", "value": "true", "effect": "NoSchedule"}
    assert parse_taint("dedicated:NoExecute") == {"key": "dedicated", "effect": "NoExecute"}
    for bad in ("novalue", "=x"):
        with pytest.raises(ValueError):
            parse_label(bad)
    for bad in ("k=v", "k=v:Sometimes", ":NoSchedule"):
        with pytest.raises(ValueError):
            parse_taint(bad)


def test_names_and_addresses_are_distinct():
    assert node_name(7, 8) == "sim-node-007"
    assert node_name(999, 1000) == "sim-node-999" and node_name(5, 10_000) == "sim-node-0005"
    assert pod_cidr(0) == "10.128.0.0/24" and pod_cidr(257) == "10.129.1.0/24"


def test_node_object_capacity_labels_taints():
    shape = NodeShape(cpu="64", memory="512Gi", gpus=8, labels={"zone": "a"},
                      taints=(parse_taint("gpu=true:NoSchedule"),))
    node = node_object("sim-node-001", shape, 1, now=1_800_000_000)
    status = node["status"]
    assert status["capacity"] == status["allocatable"]
    assert status["allocatable"] == {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti",
                                     "nvidia.com/gpu": "8"}
    labels = node["metadata"]["labels"]
    assert labels["zone"] == "a" and labels["sim.lapilli.io/simulated"] == "true"
    assert labels["kubernetes.io/hostname"] == "sim-node-001"
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    assert {a["type"]: a["address"] for a in status["addresses"]}["InternalIP"] == "172.16.0.2"
    assert is_ready(node)


def test_csinode_is_owned_by_its_node_and_has_no_drivers():
    node = {**node_object("sim-node-001", NodeShape(), 1), "metadata": {"name": "sim-node-001", "uid": "u-1"}}
    csinode = csinode_object(node)
    assert csinode["metadata"]["name"] == "sim-node-001" and csinode["spec"] == {"drivers": []}
    assert csinode["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "sim-node-001", "uid": "u-1"}]


def test_no_gpu_resource_without_gpus():
    assert "nvidia.com/gpu" not in node_object("n", NodeShape(gpus=0), 0)["status"]["capacity"]


def test_readiness_needs_condition_and_no_not_ready_taint():
    node = node_object("n", NodeShape(taints=({"key": "mine", "effect": "NoSchedule"},)), 0)
    node["spec"]["taints"].append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    assert not is_ready(node)
    assert kept_taints(node) == [{"key": "mine", "effect": "NoSchedule"}]
    node["spec"]["taints"] = kept_taints(node)
    assert is_ready(node)
    for cond in node["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond["status"] = "Unknown"
    assert not is_ready(node)


def test_slim_node_keeps_readiness_taints_and_addresses():
    node = node_object("n", NodeShape(taints=({"key": "mine", "effect": "NoSchedule"},)), 3)
    node["metadata"] |= {"uid": "u", "resourceVersion": "7"}
    node["spec"]["taints"].append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
    slim = slim_node(node)
    assert slim["metadata"] == {"name": "n", "uid": "u", "resourceVersion": "7"}
    assert (is_ready(slim), kept_taints(slim)) == (is_ready(node), kept_taints(node))
    assert slim["spec"]["podCIDR"] == "10.128.3.0/24" and slim["status"]["addresses"][0]["address"] == "172.16.0.4"
