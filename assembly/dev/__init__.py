"""A local control plane for the demo and the end-to-end tests (assembly): etcd, kube-apiserver,
kube-scheduler with Lapilli's extender, simulated nodes and a simulated kubelet."""

from assembly.dev.binaries import Binaries, BinariesNotFound, find_binaries
from assembly.dev.cluster import ClusterInfo, ClusterRunning, ClusterSpec, DevCluster, status, stop_state_dir
from assembly.dev.controlplane import ComponentFailed
from assembly.dev.kubelet import SimKubelet
from assembly.dev.nodes import NodeShape, parse_label, parse_taint

__all__ = [
    "Binaries",
    "BinariesNotFound",
    "ClusterInfo",
    "ClusterRunning",
    "ClusterSpec",
    "ComponentFailed",
    "DevCluster",
    "NodeShape",
    "SimKubelet",
    "find_binaries",
    "parse_label",
    "parse_taint",
    "status",
    "stop_state_dir",
]
