"""The names Volcano's vGPU support and the HAMi vGPU device plugin agree on: resources, annotations, modes.

Counterparts: `pkg/scheduler/api/devices/config/vgpu.go` (resource names, the node register annotation) and
`pkg/scheduler/api/devices/nvidia/vgpu/type.go` (the pod annotations the scheduler writes and reads) in Volcano, and
`pkg/plugin/vgpu/util` of Project-HAMi/volcano-vgpu-device-plugin (which writes the register annotation and reads
the assignment at container start). One name per key, here.
"""

from typing import Final

# --- extended resources (renamed through the device config's nvidia.resource*Name keys) ------------------------
VGPU_NUMBER: Final = "volcano.sh/vgpu-number"
"""Cards a container asks for (per container; a node advertises cards × split count)."""
VGPU_MEMORY: Final = "volcano.sh/vgpu-memory"
"""Device memory in MB per card (a node advertises the MB of all its cards)."""
VGPU_CORES: Final = "volcano.sh/vgpu-cores"
"""Percent of a card's compute per card (100 = the card alone)."""
VGPU_MEMORY_PERCENTAGE: Final = "volcano.sh/vgpu-memory-percentage"
"""Device memory as a percentage of each card's, instead of MB."""

# --- the node side ---------------------------------------------------------------------------------------------
NODE_REGISTER: Final = "volcano.sh/node-vgpu-register"
"""Node annotation the device plugin writes: `uuid,split,memMB,type,health,mode:` per card."""
NODE_HANDSHAKE: Final = "volcano.sh/node-vgpu-handshake"
"""Node annotation the device plugin keeps alive; Volcano's scheduler does not read it, nor does Lapilli."""

# --- what a pod may say ----------------------------------------------------------------------------------------
MODE: Final = "volcano.sh/vgpu-mode"
"""Pod annotation: only nodes in this sharing mode (`hami-core` or `mig`)."""
USE_TYPE: Final = "nvidia.com/use-gputype"
"""Pod annotation: only cards whose type contains one of these (comma list, any case)."""
NOUSE_TYPE: Final = "nvidia.com/nouse-gputype"
"""Pod annotation: no card whose type contains one of these (read only when use-gputype is absent)."""
USE_UUID: Final = "volcano.sh/vgpu-use-gpuuuid"
"""Pod annotation: only these card UUIDs (comma list, exact after trimming)."""
NOUSE_UUID: Final = "volcano.sh/vgpu-nouse-gpuuuid"
"""Pod annotation: never these card UUIDs (wins over the allow list)."""
PODGROUP_POLICY: Final = "volcano.sh/vgpu-podgroup-policy"
"""Pod annotation: `spread` keeps the PodGroup's pods on different cards."""
PODGROUP_SPREAD: Final = "spread"

# --- what the scheduler writes (on the Binding; the API server merges them into the pod) -------------------------
ASSIGNED_IDS: Final = "volcano.sh/vgpu-ids-new"
"""The pod's cards: `uuid,type,memMB,cores:` per card, `;` between containers. Kept for the pod's life."""
DEVICES_TO_ALLOCATE: Final = "volcano.sh/devices-to-allocate"
"""The same at first; the device plugin erases each container's part as it starts it."""
ASSIGNED_NODE: Final = "volcano.sh/vgpu-node"
ASSIGNED_TIME: Final = "volcano.sh/vgpu-time"
BIND_TIME: Final = "volcano.sh/bind-time"
BIND_PHASE: Final = "volcano.sh/bind-phase"
"""`allocating` when the scheduler binds; the device plugin sets `success` or `failed`."""
BIND_ALLOCATING: Final = "allocating"
BIND_SUCCESS: Final = "success"
BIND_FAILED: Final = "failed"
ASSIGNMENT_KEYS: Final = (ASSIGNED_NODE, ASSIGNED_IDS, DEVICES_TO_ALLOCATE, ASSIGNED_TIME, BIND_TIME, BIND_PHASE)

# --- sharing modes and card types ------------------------------------------------------------------------------
HAMI_CORE: Final = "hami-core"
MIG: Final = "mig"
MPS: Final = "mps"  # defined upstream, scheduled as hami-core
NVIDIA: Final = "NVIDIA"
"""The device type of a container's ask; a card's type (`NVIDIA-<model>`) must contain it."""

# --- the device config -----------------------------------------------------------------------------------------
CONFIG_MAP: Final = "volcano-vgpu-device-config"
CONFIG_NAMESPACE: Final = "kube-system"
CONFIG_KEY: Final = "device-config.yaml"

__all__ = [
    "ASSIGNED_IDS",
    "ASSIGNED_NODE",
    "ASSIGNED_TIME",
    "ASSIGNMENT_KEYS",
    "BIND_ALLOCATING",
    "BIND_FAILED",
    "BIND_PHASE",
    "BIND_SUCCESS",
    "BIND_TIME",
    "CONFIG_KEY",
    "CONFIG_MAP",
    "CONFIG_NAMESPACE",
    "DEVICES_TO_ALLOCATE",
    "HAMI_CORE",
    "MIG",
    "MODE",
    "MPS",
    "NODE_HANDSHAKE",
    "NODE_REGISTER",
    "NOUSE_TYPE",
    "NOUSE_UUID",
    "NVIDIA",
    "PODGROUP_POLICY",
    "PODGROUP_SPREAD",
    "USE_TYPE",
    "USE_UUID",
    "VGPU_CORES",
    "VGPU_MEMORY",
    "VGPU_MEMORY_PERCENTAGE",
    "VGPU_NUMBER",
]
