"""The vGPU cards of every node as the extender's verbs must see them now (the session's ledgers, live).

A session plans on a snapshot; between sessions kube-scheduler asks filter about single pods (gangs of one pass it
without a plan), moves planned members in re-plan, and binds. Each of those must see a card as taken once any pod
holds it: a pod bound to the node with its assignment annotation (`volcano.sh/vgpu-ids-new`, merged in by the
Binding; so a restarted service rebuilds everything from pods), a gang member planned there and not bound yet, and a
bind on its way (parked at the permit cache, posted, or posted and not yet seen by the watch). The book keeps one
`CardLedger` per node holding all of these, rebuilt only for a node something touched: a pod bound to it or leaving
it, the node itself, a plan change naming it, a reservation. What cards answer an ask is memoised per ask and node
shape and usage (`CardLedger.fit_key`), as in the engine; and each ask's answers per node are kept until something
touches that node, so filter's answer for a pod like the last one is a dictionary look-up per offered node (the
nodes touched in between are read from a log of touches, not found by comparing every node's count).

Active only when the scheduler conf runs deviceshare with `deviceshare.VGPUEnable`; its arguments and the device
config (the snapshot's ConfigMap, else the defaults) are those of the conf the session loop runs.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from extender.engine.conf import SchedulerConf
from extender.engine.plugins.deviceshare import DeviceShareArgs, vgpu_arguments
from extender.service.plan import Plan
from extender.service.state import ClusterState
from lapilli.devices.asks import DeviceAsk, device_ask, matching_rules
from lapilli.devices.assign import PodDevices
from lapilli.devices.cards import NOW, CardLedger, Fit, Shortfall
from lapilli.devices.config import DEFAULT_CONFIG, NvidiaConfig
from lapilli.devices.facts import ASK_KEYS, pod_device_facts
from lapilli.devices.names import PODGROUP_POLICY, PODGROUP_SPREAD
from lapilli.devices.register import advertises, node_cards
from lapilli.meta import annotations_of, labels_of, namespace_of

log = logging.getLogger("lapilli.extender")

MEMO_LIMIT = 65_536
ASK_LIMIT = 256  # distinct asks whose answers are kept
LOG_LIMIT = 4096  # touches remembered; an ask's answers older than the log are dropped whole
NO_CARDS = "node offers no vGPU cards"


class _Answers:
    """One ask's answers by node, valid as of touch number `seen`, and its last filter's whole answer (the nodes
    offered, those kept and why the others failed), valid while `seen` stays: kube-scheduler offers every feasible
    node each time, and comparing that list is cheaper than looking each node up again (compared joined by NULs,
    which no node name holds: one string comparison instead of one per name)."""

    __slots__ = ("by_node", "failed", "kept", "offered", "reasons", "seen")

    def __init__(self, seen: int) -> None:
        self.seen = seen
        self.by_node: dict[str, Fit | Shortfall | None] = {}
        self.reasons: dict[str, str] = {}  # node -> why the ask does not fit there (filter's FailedNodes text)
        self.offered: str | None = None
        self.kept: list[str] = []
        self.failed: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Reservation:
    """Cards given to a pod whose bind is on its way (parked, posted, or posted and not yet seen bound)."""

    node: str
    devices: PodDevices


class CardBook:
    def __init__(self, state: ClusterState, plan: Plan) -> None:
        self.state, self.plan = state, plan
        self.args: DeviceShareArgs | None = None
        self.config: NvidiaConfig = DEFAULT_CONFIG.nvidia
        self._conf: SchedulerConf | None = None  # the conf `args` were read from
        self._ledgers: dict[str, CardLedger | None] = {}  # node -> its ledger (absent: to be rebuilt)
        self._touched: list[str] = []  # nodes touched, in order: touch number `_base + i` is `_touched[i]`
        self._base = 0
        self.reserved: dict[str, Reservation] = {}  # pod key -> cards of a bind on its way
        self._answers: dict[DeviceAsk, _Answers] = {}
        self._memo: dict[tuple[DeviceAsk, Hashable], Fit | Shortfall] = {}
        self._asks: dict[DeviceAsk, DeviceAsk] = {}
        self._pod_asks: dict[tuple[str, str], DeviceAsk | None] = {}  # (uid, resourceVersion) -> the pod's ask
        # (the facts' ask_key, PodGroup if spread, rules) -> the ask: pods of one template make one ask
        self._template_asks: dict[Hashable, DeviceAsk | None] = {}
        # What the last pod read showed of everything its ask depends on, and the ask: a pod made from the same
        # template (the next replica, a new pod with no resourceVersion yet cached) compares equal, which costs
        # less than parsing its quantities again
        self._last: tuple[tuple[object, ...], DeviceAsk | None] | None = None

    @property
    def active(self) -> bool:
        return self.args is not None

    # ---- keeping up ----------------------------------------------------------------------------------------
    def configure(self, conf: SchedulerConf) -> None:
        """Follow the conf the session loop runs and the device config in the cluster; forget everything when
        either changed."""
        args = vgpu_arguments(conf) if conf is not self._conf else self.args
        self._conf = conf
        config = DEFAULT_CONFIG.nvidia
        if args is not None:
            found = self.state.snapshot.device_configs.get(args.config_key)
            config = found.nvidia if found is not None else config
        # Every verb asks: the same objects as last time answer without comparing them field by field.
        changed = (args is not self.args and args != self.args) or (config is not self.config and config != self.config)
        self.args, self.config = args, config
        if changed:
            self.reset()

    def reset(self) -> None:
        self._ledgers.clear()
        self._answers.clear()
        self._memo.clear()
        self._asks.clear()
        self._pod_asks.clear()
        self._template_asks.clear()
        self._last = None

    def touch(self, node: str) -> None:
        """Something holding or offering cards on `node` changed: re-read it when next asked."""
        self._ledgers.pop(node, None)
        if len(self._touched) >= LOG_LIMIT:
            self._base += len(self._touched)
            self._touched.clear()
        self._touched.append(node)

    def reserve(self, key: str, node: str, devices: PodDevices) -> None:
        self.reserved[key] = Reservation(node, devices)
        self.touch(node)

    def release(self, key: str) -> None:
        """A bind that did not happen, or a pod the cluster cache now shows bound (its own annotation holds its
        cards from then on), ended or gone."""
        held = self.reserved.pop(key, None)
        if held is not None:
            self.touch(held.node)

    # ---- reading -------------------------------------------------------------------------------------------
    def ledger(self, node: str) -> CardLedger | None:
        """The node's cards and everything holding them now; None when it offers no usable cards."""
        if node in self._ledgers:
            return self._ledgers[node]
        ledger = self._ledgers[node] = self._build(node)
        return ledger

    def _build(self, node: str) -> CardLedger | None:
        record = self.state.snapshot.nodes.get(node)
        if record is None or not record.cards.cards or not advertises(record.allocatable, self.config):
            return None
        ledger = CardLedger(node_cards(node, record.cards.cards, self.config))
        pods = self.state.snapshot.pods
        rules = [dict(r) for r in self.args.rules] if self.args is not None else []
        for key in self.state.pods_on(node):
            pod = pods.get(key)
            facts = pod.devices if pod is not None else None
            if pod is None or facts is None or facts.assigned is None or pod.phase in ("Succeeded", "Failed"):
                continue
            if facts.assigned_node and facts.assigned_node != node:
                continue
            group = f"{pod.namespace}/{pod.group}" if pod.group else ""
            ledger.hold(key, facts.assigned, group=group, rules=matching_rules(facts.labels, rules))
        for key, devices in self.plan.devices_on(node):
            if key not in ledger.pods:
                ledger.hold(key, devices, group=self._group(key))
        for key, held in self.reserved.items():
            if held.node == node:
                ledger.hold(key, held.devices, group=self._group(key))
        return ledger

    def _group(self, key: str) -> str:
        pod = self.state.snapshot.pods.get(key)
        return f"{pod.namespace}/{pod.group}" if pod is not None and pod.group else ""

    def ask(self, pod: Mapping[str, Any]) -> DeviceAsk | None:
        """The pod's card asks under the current config (None: it asks for no card, or vGPU is off). Filter and
        prioritize and bind ask about the same pod (same uid and resourceVersion) one after the other."""
        if self.args is None:
            return None
        meta = pod.get("metadata") or {}
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        if key[0] and key[1]:
            if key in self._pod_asks:
                return self._pod_asks[key]
            if len(self._pod_asks) >= 1024:
                self._pod_asks.clear()
            found = self._pod_asks[key] = self._read_ask(pod)
            return found
        return self._read_ask(pod)

    def _read_ask(self, pod: Mapping[str, Any]) -> DeviceAsk | None:
        assert self.args is not None
        annotations, labels = annotations_of(pod), labels_of(pod)
        # The ask reads the containers' resources, the annotations ASK_KEYS names, the PodGroup when its pods keep
        # to different cards, and (for the exclusivity rules) the labels: equal on those, equal asks.
        group_key = ""
        if str(annotations.get(PODGROUP_POLICY)) == PODGROUP_SPREAD:
            group = annotations.get("scheduling.k8s.io/group-name")
            group_key = f"{namespace_of(pod) or 'default'}/{group}" if group else ""
        containers = (pod.get("spec") or {}).get("containers") or []
        probe = (tuple(c.get("resources") if isinstance(c, dict) else c for c in containers),
                 tuple(annotations.get(k) for k in ASK_KEYS), group_key, labels if self.args.rules else None)
        last = self._last
        if last is not None and last[0] == probe:
            return last[1]
        found = self._template_ask(pod, annotations, labels, group_key)
        self._last = (probe, found)
        return found

    def _template_ask(self, pod: Mapping[str, Any], annotations: Mapping[str, Any], labels: Mapping[str, Any],
                      group_key: str) -> DeviceAsk | None:
        assert self.args is not None
        try:
            facts = pod_device_facts(pod.get("spec") or {}, annotations, labels)
        except ValueError:
            return None  # a quantity the pod's own request parse refuses already
        if facts is None:
            return None
        rules = matching_rules(facts.labels, [dict(r) for r in self.args.rules]) if self.args.rules else frozenset()
        spread = facts.annotations.get(PODGROUP_POLICY) == PODGROUP_SPREAD  # only then does the group count
        template = (facts.ask_key, group_key if spread else "", rules)
        if template in self._template_asks:
            return self._template_asks[template]
        found = device_ask(facts.containers, facts.annotations, self.config, group_key, rules)
        if found is not None:
            if len(self._asks) >= MEMO_LIMIT:
                self._asks.clear()
            found = self._asks.setdefault(found, found)
        if len(self._template_asks) >= MEMO_LIMIT:
            self._template_asks.clear()
        self._template_asks[template] = found
        return found

    def fit(self, ask: DeviceAsk, node: str, exclude: str = "") -> Fit | Shortfall | None:
        """Where the ask fits on `node` now (everything held counts, `exclude`'s own holding aside); None when
        the node offers no usable cards."""
        ledger = self.ledger(node)
        if ledger is None:
            return None
        held = ledger.pods.get(exclude) if exclude else None
        if held is not None:  # the pod's own planned cards do not stand in its way
            scratch = CardLedger(ledger.cards, {k: v for k, v in ledger.pods.items() if k != exclude})
            return self._fit(scratch, ask)
        answers = self._current(ask).by_node
        if node in answers:
            return answers[node]
        result = answers[node] = self._fit(ledger, ask)
        return result

    def filter(self, ask: DeviceAsk, offered: list[str]) -> tuple[list[str], dict[str, str]]:
        """The offered nodes whose cards fit `ask` now, and why each other one does not."""
        entry = self._current(ask)
        joined = "\0".join(offered)
        if entry.offered == joined:  # the same nodes as last time, none touched since
            # every node kept: the offered list itself (the caller's), else a copy the caller may change
            return (offered if len(entry.kept) == len(offered) else list(entry.kept)), dict(entry.failed)
        answers, reasons = entry.by_node, entry.reasons
        kept: list[str] = []
        failed: dict[str, str] = {}
        for node in offered:
            if node in reasons:
                failed[node] = reasons[node]
                continue
            if node not in answers:
                ledger = self.ledger(node)
                answers[node] = None if ledger is None else self._fit(ledger, ask)
            fit = answers[node]
            if isinstance(fit, Fit):
                kept.append(node)
            else:
                why = reasons[node] = NO_CARDS if fit is None else f"no vGPU card fits: {fit.reason}"
                failed[node] = why
        entry.offered, entry.kept, entry.failed = joined, kept, failed
        return list(kept), dict(failed)

    def _current(self, ask: DeviceAsk) -> _Answers:
        """`ask`'s answers, less those of nodes touched since they were given."""
        now = self._base + len(self._touched)
        entry = self._answers.get(ask)
        if entry is None or entry.seen < self._base:
            if entry is None and len(self._answers) >= ASK_LIMIT:
                self._answers.clear()
            entry = self._answers[ask] = _Answers(now)
        elif entry.seen != now:
            for node in self._touched[entry.seen - self._base:]:
                entry.by_node.pop(node, None)
                entry.reasons.pop(node, None)
            entry.seen = now
            entry.offered = None
        return entry

    def _fit(self, ledger: CardLedger, ask: DeviceAsk) -> Fit | Shortfall:
        assert self.args is not None
        key = (ask, ledger.fit_key(ask))
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            found = self._memo[key] = ledger.fit(ask, NOW, self.args.policy, self.config.gpu_memory_factor)
        return found

    def devices(self, fit: Fit, node: str) -> PodDevices:
        ledger = self.ledger(node)
        assert ledger is not None
        return fit.devices(ledger.cards)

    def check(self, node: str, devices: PodDevices, exclude: str) -> list[str]:
        """Why `devices` cannot go on `node` now, its pod's own holding (`exclude`) aside; [] when they can."""
        ledger = self.ledger(node)
        if ledger is None:
            return [f"node {node} offers no vGPU cards"]
        return ledger.check(devices, exclude)


__all__ = ["CardBook", "Reservation"]
