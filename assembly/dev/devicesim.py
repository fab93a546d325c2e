"""What the vGPU device plugin does when the simulated kubelet starts a pod: check the cards the scheduler gave it.

A node running Project-HAMi's vGPU device plugin starts a container on the cards in the pod's
`volcano.sh/devices-to-allocate` annotation (`vgpu-ids-new` keeps the whole assignment) and fails the pod when there
is none, when they are another node's, or when they do not exist. A simulated node has no cards to run out of, so
the simulated kubelet checks what the real one would trip over later: every card of the assignment is registered on
this node (`volcano.sh/node-vgpu-register`), each asking container got one card per card it asks for, and, with the
pods it already runs, no card holds more memory than it has, is shared by more pods than its split, gives out more
than 100 % of its cores, or has a MIG slice given twice. A pod that fails the check is refused (phase Failed, reason
`UnexpectedAdmissionError`, as kubelet reports a device plugin's refusal), so an end-to-end test sees a wrong
assignment instead of a pod that runs on cards it could never have had.

The registry of what runs is per node and updated before the kubelet's status write is awaited, so two pods
started at once on one node are checked one after the other.
"""

from __future__ import annotations

from typing import Final

from lapilli.devices.asks import device_ask
from lapilli.devices.assign import PodDevices
from lapilli.devices.cards import CardLedger
from lapilli.devices.config import DEFAULT_CONFIG, NvidiaConfig
from lapilli.devices.facts import node_card_facts, pod_device_facts
from lapilli.devices.names import ASSIGNED_IDS, ASSIGNED_NODE
from lapilli.devices.register import node_cards
from lapilli.meta import Obj, annotations_of, key_of, labels_of, name_of

REFUSED_REASON: Final = "UnexpectedAdmissionError"


class CardAdmission:
    """The cards each node's admitted pods hold, and the check a starting pod must pass."""

    def __init__(self, config: NvidiaConfig = DEFAULT_CONFIG.nvidia) -> None:
        self.config = config
        self._running: dict[str, dict[str, PodDevices]] = {}  # node -> pod key -> its cards

    def refusal(self, pod: Obj, node: Obj) -> str | None:
        """Why the device plugin would fail this pod on `node` (None: it starts); if it starts, it is recorded
        as holding its cards."""
        facts = pod_device_facts(pod.get("spec") or {}, annotations_of(pod), labels_of(pod))
        if facts is None:
            return None
        ask = device_ask(facts.containers, facts.annotations, self.config)
        if facts.assigned is None:
            return None if ask is None else f"the pod asks for vGPU cards and carries no assignment ({ASSIGNED_IDS})"
        name = name_of(node)
        if facts.assigned_node and facts.assigned_node != name:
            return f"its cards were assigned on node {facts.assigned_node} ({ASSIGNED_NODE}), not {name}"
        if facts.problem:
            return facts.problem
        if ask is not None:
            got = [len(c) for c in facts.assigned]
            want = [c.nums for c in ask.containers]
            if got != want:
                return f"containers ask for {want} cards, the assignment gives {got}"
        problems = self._ledger(node).check(facts.assigned, exclude=key_of(pod))
        if problems:
            return "; ".join(problems)
        self._running.setdefault(name, {})[key_of(pod)] = facts.assigned
        return None

    def _ledger(self, node: Obj) -> CardLedger:
        cards = node_card_facts(annotations_of(node))
        ledger = CardLedger(node_cards(name_of(node), cards.cards, self.config))
        for key, devices in self._running.get(name_of(node), {}).items():
            ledger.hold(key, devices)
        return ledger

    def running(self, pod: Obj, node: str) -> None:
        """A pod found running (started before this kubelet did): it holds its cards."""
        facts = pod_device_facts(pod.get("spec") or {}, annotations_of(pod), labels_of(pod))
        if facts is not None and facts.assigned is not None:
            self._running.setdefault(node, {})[key_of(pod)] = facts.assigned

    def stopped(self, key: str, node: str) -> None:
        """A pod that ended or went away: its cards are free."""
        self._running.get(node, {}).pop(key, None)


__all__ = ["REFUSED_REASON", "CardAdmission"]
