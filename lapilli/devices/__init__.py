"""Shared GPUs: Volcano's vGPU model (cards a node registers, what pods ask, where they fit, the assignment
annotations), pure, for the engine, the extender's verbs, the simulated kubelet and the reports alike."""

from lapilli.devices.asks import ContainerAsk, DeviceAsk, device_ask, matching_rules
from lapilli.devices.assign import CardUse, PodDevices, assigned, assignment_annotations, decode_pod_devices
from lapilli.devices.cards import FUTURE, HELD, NOW, PIPELINED, RELEASING, CardLedger, Fit, Holding, Shortfall
from lapilli.devices.config import DEFAULT_CONFIG, DeviceConfig, NvidiaConfig, config_from_configmap
from lapilli.devices.register import Card, NodeCards, advertises, node_cards, parse_register

__all__ = [
    "DEFAULT_CONFIG",
    "FUTURE",
    "HELD",
    "NOW",
    "PIPELINED",
    "RELEASING",
    "Card",
    "CardLedger",
    "CardUse",
    "ContainerAsk",
    "DeviceAsk",
    "DeviceConfig",
    "Fit",
    "Holding",
    "NodeCards",
    "NvidiaConfig",
    "PodDevices",
    "Shortfall",
    "advertises",
    "assigned",
    "assignment_annotations",
    "config_from_configmap",
    "decode_pod_devices",
    "device_ask",
    "matching_rules",
    "node_cards",
    "parse_register",
]
