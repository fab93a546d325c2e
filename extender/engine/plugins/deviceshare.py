"""deviceshare: pods share GPUs by memory, compute and MIG slice (Volcano's `plugins/deviceshare` with vGPU).

With `deviceshare.VGPUEnable: true`, a pod whose containers ask for `volcano.sh/vgpu-number` / `vgpu-memory` /
`vgpu-cores` / `vgpu-memory-percentage` (or the names the device config renames them to) fits a node only where
each asking container finds distinct cards with room (`lapilli.devices.cards`), and is given those cards when it
is placed. The node's cards and what holds them form a ledger per node, built at session open from the nodes'
register annotations and the assignments running and bound pods carry (`volcano.sh/vgpu-ids-new`), so nothing is
lost across a restart; every placement, eviction and undo moves its pod's holding through the session's event
handlers, so a discarded Statement gives back its cards and an evicted pod's slice is free for a pipelined one.
Each pod placed is given its cards in `ssn.assignments` at session close, for the caller to write on the
Binding.

Arguments (as Volcano reads them): `deviceshare.VGPUEnable` (false), `deviceshare.SchedulePolicy` (`binpack` |
`spread` | "": which card first, and the card score), `deviceshare.ScheduleWeight` (0: the card score does not
rank nodes; else round(score) × weight), `deviceshare.GPUExclusiveRules` (label maps: pods matching one rule never
share a hami-core card with each other), `deviceshare.KnownGeometriesCMName` / `...Namespace`
(`volcano-vgpu-device-config` in `kube-system`: the device config, from the snapshot's ConfigMaps; defaults when
absent). Accepted and false by default, refused when true because Lapilli does not do them:
`deviceshare.GPUSharingEnable`, `deviceshare.GPUNumberEnable` (the legacy gpushare path),
`deviceshare.NodeLockEnable` (Lapilli writes the assignment on the Binding itself), the Ascend vNPU switches.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.arguments import Arguments, ConfError, boolean, integer, text
from extender.engine.conf import SchedulerConf
from extender.engine.interface import EventHandler, Index, SessionView
from extender.engine.model import IS_ALLOCATED, ON_NODE_STATUS, Node, Task, TaskStatus
from extender.engine.registry import register_plugin
from lapilli.devices.asks import DeviceAsk, device_ask, matching_rules
from lapilli.devices.cards import (
    FUTURE,
    HELD,
    NOW,
    PIPELINED,
    RELEASING,
    CardLedger,
    Fit,
    Holding,
    Shortfall,
    Signatures,
)
from lapilli.devices.config import DEFAULT_CONFIG, NvidiaConfig
from lapilli.devices.names import CONFIG_MAP, CONFIG_NAMESPACE, PODGROUP_POLICY, PODGROUP_SPREAD
from lapilli.devices.register import node_cards

NAME: Final = "deviceshare"
POLICIES: Final = ("", "binpack", "spread")
UNSUPPORTED: Final = (
    "deviceshare.GPUSharingEnable",
    "deviceshare.GPUNumberEnable",
    "deviceshare.NodeLockEnable",
    "deviceshare.AscendMindClusterVNPUEnable",
    "deviceshare.AscendHAMiVNPUEnable",
)
REASON_NO_CARDS: Final = "node(s) had no vGPU cards"
REASON_MODE: Final = "node(s) were in another vGPU mode"
REASON_FEW_CARDS: Final = "node(s) had too few vGPU cards"
REASON_UUID: Final = "node(s) had no vGPU card matching the pod's UUID constraints"
REASON_ROOM: Final = "node(s) had no vGPU card with room for the pod"
_REASONS: Final = {"mode": REASON_MODE, "cards": REASON_FEW_CARDS, "uuid": REASON_UUID, "room": REASON_ROOM}


@dataclass(frozen=True, slots=True)
class DeviceShareArgs:
    vgpu: bool = False
    policy: str = ""
    weight: int = 0
    rules: tuple[tuple[tuple[str, str], ...], ...] = ()
    config_name: str = CONFIG_MAP
    config_namespace: str = CONFIG_NAMESPACE

    @property
    def config_key(self) -> str:
        return f"{self.config_namespace}/{self.config_name}"


def _rules(raw: object) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Volcano's `parseExclusiveRules`: a list of label maps; non-string values are dropped, empty rules too."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfError("argument deviceshare.GPUExclusiveRules: expected a list of label maps")
    rules = []
    for item in raw:
        if isinstance(item, Mapping):
            labels = tuple(sorted((str(k), v) for k, v in item.items() if isinstance(v, str)))
            if labels:
                rules.append(labels)
    return tuple(rules)


def parse_arguments(arguments: Arguments) -> DeviceShareArgs:
    for key in UNSUPPORTED:
        if boolean(arguments, key, False):
            raise ConfError(f"argument {key}: true is not supported by Lapilli (deviceshare.VGPUEnable is)")
    policy = text(arguments, "deviceshare.SchedulePolicy", "")
    if policy not in POLICIES:
        raise ConfError(f'argument deviceshare.SchedulePolicy: "{policy}" is not binpack or spread')
    weight = integer(arguments, "deviceshare.ScheduleWeight", 0)
    return DeviceShareArgs(
        vgpu=boolean(arguments, "deviceshare.VGPUEnable", False),
        policy=policy,
        weight=weight,
        rules=_rules(arguments.get("deviceshare.GPUExclusiveRules")),
        config_name=text(arguments, "deviceshare.KnownGeometriesCMName", CONFIG_MAP),
        config_namespace=text(arguments, "deviceshare.KnownGeometriesCMNamespace", CONFIG_NAMESPACE),
    )


def vgpu_arguments(conf: SchedulerConf) -> DeviceShareArgs | None:
    """The deviceshare arguments of `conf` when it turns vGPU on (its first such entry), else None: what the
    extender's verbs, the reports and the service's ConfigMap watch follow."""
    for tier in conf.tiers:
        for option in tier.plugins:
            if option.name == NAME:
                args = parse_arguments(option.arguments)  # validated when the conf was loaded
                if args.vgpu:
                    return args
    return None


Outcome = tuple[Fit | Shortfall, Fit | Shortfall]  # the fit if allocated now, and if pipelined


class CardFit:
    """The node-local filter and score over each node's card ledger, and the event handlers that keep the ledgers
    in step with the session's placements."""

    def __init__(self, args: DeviceShareArgs, config: NvidiaConfig, filters: bool, scores: bool) -> None:
        self.args, self.config = args, config
        self.filters, self.scores = filters, scores
        self.ledgers: list[CardLedger | None] = []
        self.row_of: dict[str, int] = {}
        # Whether some ask keeps its PodGroup's pods on different cards: only then is a placed pod's group read, so
        # otherwise placements record none and pods given the same share of a card share one record of it.
        self.groups = False
        # (id of the interned ask, node key) -> outcome: asks are interned for the session, so their ids are stable
        self._memo: dict[tuple[int, Hashable], Outcome] = {}
        self.signatures = Signatures()  # ledger signatures by number, for the memo keys and the report

    # ---- NodeLocal ------------------------------------------------------------------------------------------
    def applies(self, task: Task) -> bool:
        return task.device_ask is not None

    def key(self, task: Task, row: int) -> Hashable:
        ledger = self.ledgers[row]
        ask = task.device_ask
        if ledger is None or ask is None:
            return None
        return ledger.signature_id(self.signatures) if ask.plain else ledger.fit_key(ask, self.signatures)

    def outcome(self, task: Task, row: int) -> Outcome | None:
        """(fit now, fit pipelined) of the task on node `row`; None for a node without usable cards."""
        ledger = self.ledgers[row]
        ask = task.device_ask
        if ledger is None or ask is None:
            return None
        memo_key = (id(ask), self.key(task, row))
        found = self._memo.get(memo_key)
        if found is None:
            policy, factor = self.args.policy, self.config.gpu_memory_factor
            now = ledger.fit(ask, NOW, policy, factor)
            unchanged = all(h.kind == HELD for h in ledger.pods.values())
            future = now if unchanged else ledger.fit(ask, FUTURE, policy, factor)
            found = self._memo[memo_key] = (now, future)
        return found

    def evaluate(self, task: Task, row: int) -> tuple[bool, bool, float]:
        outcome = self.outcome(task, row)
        if outcome is None:
            return (not self.filters, not self.filters, 0.0)
        now, future = outcome
        best = now if isinstance(now, Fit) else future
        score = 0.0
        if self.scores and self.args.weight > 0 and isinstance(best, Fit):
            score = float(int(best.score + 0.5) * self.args.weight)  # Volcano: floor(s + 0.5) × weight
        if not self.filters:
            return True, True, score
        return isinstance(now, Fit), isinstance(future, Fit), score

    def explain(self, task: Task, node: Node) -> list[str]:
        if not self.filters:
            return []
        outcome = self.outcome(task, node.idx)
        if outcome is None:
            return [REASON_NO_CARDS]
        future = outcome[1]
        return [] if isinstance(future, Fit) else [_REASONS[future.kind]]

    def summary(self, task: Task, rows: Index) -> str:
        """`no card with 20 GB free: best sim-node-3 card 1 with 12 GB` when the cards of none of the nodes `rows`
        admit the task, naming the card with the most memory free among those it may use; "" when some do."""
        best: tuple[int, str, int] | None = None  # (MB free, node, card)
        need, kinds = 0, set()
        for row in rows.tolist():
            ledger = self.ledgers[row]
            outcome = self.outcome(task, row)
            if outcome is None or ledger is None:
                continue
            short = outcome[1]
            if isinstance(short, Fit):
                return ""
            kinds.add(short.kind)
            need = max(need, short.need)
            if short.kind == "room" and short.card is not None and (best is None or short.free > best[0]):
                best = (short.free, ledger.cards.node, short.card)
        if not kinds:
            return "no node has vGPU cards"
        if best is None:
            return f"no vGPU card can take the pod ({', '.join(sorted(kinds))})"
        return f"no card with {_gb(need)} free: best {best[1]} card {best[2]} with {_gb(best[0])}"

    # ---- event handlers ---------------------------------------------------------------------------------------
    def ledger_of(self, task: Task) -> CardLedger | None:
        """The ledger of the task's node (None when it is on none, or the node has no usable cards)."""
        row = self.row_of.get(task.node or "")
        return None if row is None else self.ledgers[row]

    def allocated(self, task: Task) -> None:
        """A task placed (allocated or pipelined), or an eviction undone. Only the node's ledger records the
        placement (a reference to a shared hold); the assignment is made at close for the pods still placed."""
        ask = task.device_ask
        if ask is None:
            return
        uid = task.uid
        row = self.row_of.get(task.node or "")
        ledger = None if row is None else self.ledgers[row]
        if row is None or ledger is None:
            return
        if uid in ledger.pods:  # an eviction undone: the pod keeps the cards it had
            ledger.set_kind(uid, HELD)
            return
        # The outcome the placement just read, from the memo (`outcome`'s look-up, inlined: once per placement).
        signatures = self.signatures
        outcome = self._memo.get((id(ask), ledger.signature_id(signatures) if ask.plain
                                  else ledger.fit_key(ask, signatures)))
        if outcome is None:
            outcome = self.outcome(task, row)
            assert outcome is not None
        pipelined = task.status is TaskStatus.PIPELINED
        fit = outcome[1] if pipelined else outcome[0]
        if not isinstance(fit, Fit):
            return  # placed around the filter (predicate off): the bind computes cards, or refuses
        ledger.hold_fit(uid, fit, PIPELINED if pipelined else HELD, task.job if self.groups else "", ask.rules)

    def deallocated(self, task: Task) -> None:
        """A placement undone (back to Pending), or an eviction started (the cards free up once it is gone)."""
        ledger = self.ledger_of(task)  # handlers still see the node the task leaves
        if ledger is None or task.uid not in ledger.pods:
            return
        if task.status is TaskStatus.RELEASING:
            ledger.set_kind(task.uid, RELEASING)
            return
        ledger.release(task.uid)


class DeviceSharePlugin:
    name = NAME

    def __init__(self, args: DeviceShareArgs) -> None:
        self.args = args
        self.fit: CardFit | None = None
        self.problems: list[str] = []  # assignments that name cards a node does not have (reported by the caller)

    def on_session_open(self, ssn: SessionView) -> None:
        if not self.args.vgpu:
            return
        flags = ssn.current_flags()
        config = ssn.device_configs.get(self.args.config_key, DEFAULT_CONFIG).nvidia
        fit = self.fit = CardFit(self.args, config, flags.get("enablePredicate", True),
                                 flags.get("enableNodeOrder", True))
        self._ledgers(ssn, fit, config)
        self._asks(ssn, fit, config)
        self._holdings(ssn, fit)
        ssn.add_node_local(fit)
        ssn.add_event_handler(EventHandler(allocate=fit.allocated, deallocate=fit.deallocated))

    @staticmethod
    def _ledgers(ssn: SessionView, fit: CardFit, config: NvidiaConfig) -> None:
        index = ssn.dims.index
        columns = [index.get(n) for n in (config.count_name, config.core_name, config.memory_name)]
        # Volcano's NewGPUDevices (`advertises`): the count, core and memory resources are all in allocatable.
        found = [c for c in columns if c is not None]
        advertised = (np.all(ssn.arrays.allocatable[:, found] > 0, axis=1).tolist() if len(found) == len(columns)
                      else [False] * len(ssn.nodes))
        for node in ssn.nodes:
            fit.row_of[node.name] = node.idx
            ledger = None
            if node.cards and advertised[node.idx]:
                ledger = CardLedger(node_cards(node.name, node.cards, config), shared=fit.signatures)
            fit.ledgers.append(ledger)

    def _asks(self, ssn: SessionView, fit: CardFit, config: NvidiaConfig) -> None:
        interned: dict[DeviceAsk, DeviceAsk] = {}
        # the id of a template's ask key, or (the key, PodGroup if spread, rules) -> the template's ask
        read: dict[Hashable, DeviceAsk | None] = {}
        rules = [dict(r) for r in self.args.rules]
        for job in ssn.jobs.values():
            for task in job.tasks.values():
                self._ask(task, config, rules, interned, read)
        for node in ssn.nodes:
            for task in node.tasks.values():
                if task.device_ask is None and not task.job:
                    self._ask(task, config, rules, interned, read)
        fit.groups = any(ask.spread_group for ask in interned)

    @staticmethod
    def _ask(task: Task, config: NvidiaConfig, rules: list[dict[str, str]],
             interned: dict[DeviceAsk, DeviceAsk], read: dict[Hashable, DeviceAsk | None]) -> None:
        facts = task.devices
        if facts is None:
            task.device_ask = None
            return
        matched = matching_rules(facts.labels, rules) if rules else frozenset()
        group = task.job if facts.annotations.get(PODGROUP_POLICY) == PODGROUP_SPREAD else ""
        key: Hashable = None
        if facts.ask_key is not None:
            # By the key's identity (kept alive by the snapshot for the session) when nothing else tells pods apart.
            key = id(facts.ask_key) if not group and not matched else (facts.ask_key, group, matched)
            if key in read:
                task.device_ask = read[key]
                return
        ask = device_ask(facts.containers, facts.annotations, config, task.job, matched)
        task.device_ask = None if ask is None else interned.setdefault(ask, ask)
        if key is not None:
            read[key] = task.device_ask

    def _holdings(self, ssn: SessionView, fit: CardFit) -> None:
        """Cards held by pods on nodes (running, bound, binding, releasing), from their assignment annotations."""
        for node in ssn.nodes:
            ledger = fit.ledgers[node.idx]
            if ledger is None:
                continue
            for task in node.tasks.values():
                facts = task.devices
                if facts is None or facts.assigned is None or task.status not in ON_NODE_STATUS:
                    continue
                if facts.assigned_node and facts.assigned_node != node.name:
                    self.problems.append(f"pod {task.key}: assigned cards of node {facts.assigned_node}, "
                                         f"bound to {node.name}")
                    continue
                rules = task.device_ask.rules if task.device_ask is not None else frozenset()
                kind = RELEASING if task.status is TaskStatus.RELEASING else HELD
                for problem in ledger.hold(task.uid, facts.assigned, kind, task.job, rules):
                    self.problems.append(f"pod {task.key}: {problem}")

    def on_session_close(self, ssn: SessionView) -> None:
        fit = self.fit
        if fit is not None:
            ssn.card_report = CardReport(fit.ledgers, fit.signatures)
            _placed(ssn, fit)
        self.fit = None


def _gb(mb: int) -> str:
    gb = mb / 1024
    return f"{gb:.0f} GB" if gb >= 10 or gb == int(gb) else f"{gb:.1f} GB"


CardRow = tuple[str, int, int, int, int]  # per card: uuid, MB in use, MB, pods, split


class CardReport(Mapping[str, tuple[CardRow, ...]]):
    """Each node's cards as the session leaves them, for the reports (dashboard, job why): made per node when read,
    since most sessions' callers never read it (a session of 5,000 nodes would make 40,000 rows for nothing). Equal
    signatures hold equal sums: each is summed once. Pickles as the plain dict it stands for."""

    __slots__ = ("_ledgers", "_made", "_signatures", "_sums")

    def __init__(self, ledgers: list[CardLedger | None], signatures: Signatures) -> None:
        # The ledgers no longer change once the session has closed.
        self._ledgers = {ledger.cards.node: ledger for ledger in ledgers if ledger is not None}
        self._signatures = signatures
        self._sums: dict[int, list[tuple[int, int, int, int]]] = {}
        self._made: dict[str, tuple[CardRow, ...]] = {}

    def __getitem__(self, node: str) -> tuple[CardRow, ...]:
        made = self._made.get(node)
        if made is None:
            ledger = self._ledgers[node]
            number = ledger.signature_id(self._signatures)
            summary = self._sums.get(number)
            if summary is None:
                summary = self._sums[number] = ledger.summary()
            made = self._made[node] = tuple(
                (card.uuid, used, memory, pods, split)
                for card, (used, memory, pods, split) in zip(ledger.cards.cards, summary, strict=True))
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._ledgers)

    def __len__(self) -> int:
        return len(self._ledgers)

    def __reduce__(self) -> tuple[type[dict[str, tuple[CardRow, ...]]], tuple[dict[str, tuple[CardRow, ...]]]]:
        return dict, (dict(self.items()),)


def _placed(ssn: SessionView, fit: CardFit) -> None:
    """Once every decision is made: each pod placed this session (binding or pipelined) gets its assignment in
    `ssn.assignments`, for the Binding; and each pod holding cards counts in its queue's status the device memory
    and cores its cards hold (a pod of 2 cards × 20 GB holds 40 GB; one asking a percentage, that share of its
    cards), not its request (Volcano's `addNodeSharableDeviceUsage`, at session close)."""
    memory, cores = (ssn.dims.index.get(fit.config.memory_name), ssn.dims.index.get(fit.config.core_name))
    counted = memory is not None or cores is not None
    # (request's id, holdings' id) -> (that request, those holdings: kept alive while their ids are a key; the
    # vector counted)
    made: dict[tuple[int, int], tuple[npt.NDArray[np.float64], tuple[Holding, ...], npt.NDArray[np.float64]]] = {}
    # A hold (shared by the pods one memoised fit placed, compared by identity) -> (the request it was last counted
    # for, the vector counted): one look-up a pod, without making a key.
    counted_as: dict[object, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
    assignments, row_of, ledgers = ssn.assignments, fit.row_of, fit.ledgers
    binding, pipelined = TaskStatus.BINDING, TaskStatus.PIPELINED
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            if task.device_ask is None:
                continue
            status = task.status
            placed = status is binding or status is pipelined
            allocated = counted and IS_ALLOCATED[status]
            if not (placed or allocated):
                continue
            row = row_of.get(task.node or "")
            ledger = None if row is None else ledgers[row]
            hold = None if ledger is None else ledger.pods.get(task.uid)
            if ledger is None or hold is None:
                continue
            if placed and hold.types:  # placed this session (a hold read from an annotation has no types)
                assignments[task.uid] = ledger.assignment(hold)
            if not allocated:
                continue
            request = task.resreq
            found = counted_as.get(hold)
            if found is None or found[0] is not request:
                key = (id(request), id(hold.holdings))
                entry = made.get(key)
                if entry is None:
                    held = request.copy()  # request vectors are shared between tasks: a new one, shared in turn
                    if memory is not None:
                        held[memory] = 1000.0 * sum(h.memory for h in hold.holdings)
                    if cores is not None:
                        held[cores] = 1000.0 * sum(h.cores for h in hold.holdings)
                    entry = made[key] = (request, hold.holdings, held)
                found = counted_as[hold] = (request, entry[2])
            task.resreq = found[1]


register_plugin(NAME, parse_arguments, DeviceSharePlugin)
