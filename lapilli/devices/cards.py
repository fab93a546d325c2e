"""What is in use on a node's cards, and where a pod's card asks fit: Volcano's vGPU filter and score.

Counterpart: `checkNodeGPUSharingPredicateAndScore`, `sortedDeviceIndicesByPolicy`, `GPUScore` and the hami-core and
MIG sharing factories (`pkg/scheduler/api/devices/nvidia/vgpu`). For each asking container in order, the cards are
tried in the policy's order — binpack: most memory in use first; spread: fewest pods first; no policy: last card
first — and a card serves the container when the pod's UUID lists allow it, it is healthy, fewer than `split` pods
use it, no pod of the same PodGroup is on it (under `vgpu-podgroup-policy: spread`), no pod of the same exclusivity
rule is on it (hami-core cards), it has the memory free, its cores stay within 100 % (an ask of 100 needs an unused
card; an ask of 0 does not go on a card whose cores are all taken), its type passes the pod's type filters, and (MIG
cards) a slice fits. A container takes distinct cards; the node's score adds, per card given, binpack: 100 × the
card's memory in use afterwards / its memory; spread: 100 when the card was unused.

Holdings are kept by kind — held (placed, bound, running), releasing (being evicted), pipelined (placed this session
on room still being released) — so one ledger answers both of the session's questions: may a pod be allocated now
(`NOW`: everything on the card counts) and may it be pipelined (`FUTURE`: releasing pods' slices are free).

Differences from Volcano, on purpose: an unhealthy card serves no pod (upstream reads health and never checks it);
the spread score counts a card unused before the pod is added (upstream scores after adding, so spread always
scored 0); see `mig.py` for slices.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final, NamedTuple, TypeAlias

from lapilli.devices.asks import ContainerAsk, DeviceAsk
from lapilli.devices.assign import CardUse, PodDevices, mig_id
from lapilli.devices.mig import group_index, pick_slice
from lapilli.devices.names import HAMI_CORE, MIG
from lapilli.devices.register import NodeCards

HELD: Final = 0
RELEASING: Final = 1
PIPELINED: Final = 2
NOW: Final = (HELD, RELEASING, PIPELINED)
FUTURE: Final = (HELD, PIPELINED)
BINPACK: Final = "binpack"
SPREAD: Final = "spread"
MULTIPLIER: Final = 100.0


class Holding(NamedTuple):
    """One pod's use of one card: MB, percent of compute, and its MIG slice (group index, position) if any. (A named
    tuple, made and hashed on the session's path per placement.)"""

    card: int
    memory: int
    cores: int
    slot: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Fit:
    """Where a pod's asks fit, by card index (so nodes of one shape and usage share it): what each card holds, how
    many of the holdings each asking container has, each container's device type, and the node's score."""

    holdings: tuple[Holding, ...]
    sizes: tuple[int, ...]
    types: tuple[str, ...]
    score: float

    def devices(self, node: NodeCards) -> PodDevices:
        """The assignment on `node`'s cards, as the annotation lists it."""
        return _assignment(node, self.holdings, self.sizes, self.types)


def _assignment(node: NodeCards, holdings: tuple[Holding, ...], sizes: tuple[int, ...],
                types: tuple[str, ...]) -> PodDevices:
    """`holdings` on `node`'s cards, `sizes[i]` of them for the i-th asking container, of device type `types[i]`."""
    if len(sizes) == 1:  # one asking container, the usual pod
        type_ = types[0]
        if len(holdings) == 1 and holdings[0].slot is None:  # of one whole card, the most usual
            card, memory, cores, _ = holdings[0]
            # tuple.__new__: the named tuple's own constructor is a Python call, once per pod placed
            return ((tuple.__new__(CardUse, (node.cards[card].uuid, type_, memory, cores)),),)
        return (tuple([_use(node, h, type_) for h in holdings]),)
    out: list[tuple[CardUse, ...]] = []
    start = 0
    for size, type_ in zip(sizes, types, strict=True):
        out.append(tuple([_use(node, h, type_) for h in holdings[start:start + size]]))
        start += size
    return tuple(out)


def _use(node: NodeCards, holding: Holding, type_: str) -> CardUse:
    card, memory, cores, slot = holding
    uuid = node.cards[card].uuid
    if slot is not None:
        uuid = mig_id(uuid, node.geometries[card][slot[0]].group, slot[1])
    return CardUse(uuid, type_, memory, cores)


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Why a pod's asks do not fit a node. `kind`: mode | cards | uuid | room; for room, the card that came
    closest for the container that did not fit (most memory free among cards the pod may use), `free` MB there
    and `need` MB per card."""

    kind: str
    reason: str
    card: int | None = None
    free: int = 0
    need: int = 0


@dataclass(slots=True, eq=False)
class _Hold:
    """What a pod holds on a node's cards, by card index. Never changed once made: pods placed alike (the same
    share of the same card number, kind, device types, group and rules) share one across the session's ledgers, so
    a placement records a reference, not a new object. Compared and hashed by identity."""

    kind: int
    holdings: tuple[Holding, ...]
    group: str
    rules: frozenset[int]
    # A fit's: each asking container's device type and number of holdings; () for one read from an annotation
    types: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()


_Item: TypeAlias = tuple[int, int, int, int, tuple[int, int]]  # kind, card, MB, cores, MIG slot ((-1, -1): none)
NO_SLOT: Final = (-1, -1)
PENDING_MAX: Final = 8  # changes a ledger remembers since its last numbered signature


def _items(hold: _Hold) -> list[_Item]:
    kind = hold.kind
    return [(kind, card, memory, cores, slot or NO_SLOT) for card, memory, cores, slot in hold.holdings]


class Signatures:
    """Numbers for ledger signatures, shared by every ledger given it for as long as they live (one session's).
    Numbering a signature hashes all of it; a ledger that changed since its signature was numbered is numbered
    instead by (that number, the changes), which equal nodes filled alike repeat: `moves` remembers where those
    lead, so most numberings hash a few small tuples, not every holding of the node."""

    __slots__ = ("by_fit", "holds", "ids", "moves")

    def __init__(self) -> None:
        self.ids: dict[tuple[object, ...], int] = {}
        self.moves: dict[tuple[int, tuple[tuple[int, int, tuple[Holding, ...]], ...]], int] = {}
        # (kind, holdings, device types, group, rules) -> the one hold placements of that share record
        self.holds: dict[tuple[object, ...], _Hold] = {}
        # (a fit's id, kind, group, rules) -> (that fit, kept alive while its id is a key; its hold): a memoised fit
        # recurs for every pod it places, and hashing its holdings and types again for each pod cost a third of
        # recording the placement
        self.by_fit: dict[tuple[int, int, str, frozenset[int]], tuple[Fit, _Hold]] = {}


@dataclass(slots=True)
class _Usage:
    """The per-card sums of one view, changed as a pod's containers are tried (its own earlier containers)."""

    memory: list[int]
    cores: list[int]
    pods: list[int]
    slots: list[set[int]]
    groups: list[int | None]  # the MIG group a card is cut by, None while idle


@dataclass(slots=True)
class CardLedger:
    """One node's cards and what pods hold on them. `version` grows with every change."""

    cards: NodeCards
    pods: dict[str, _Hold] = field(default_factory=dict)
    version: int = 0
    _signature: tuple[object, ...] | None = None
    _signature_id: int = -1  # the signature's number in the `Signatures` last given to `fit_key`
    _base_id: int = -1  # the last number given, while `_pending` lists every change since (-1: too many)
    _pending: list[tuple[int, int, tuple[Holding, ...]]] = field(default_factory=list, repr=False)
    # Where placements intern their holds (`hold_fit`): the session's `Signatures`, or the ledger's own table.
    shared: Signatures | None = field(default=None, repr=False)
    # hold -> the assignment it makes on these cards, made when first asked for (`devices_of`), once per distinct
    # hold on this node, not per pod; pods recorded from their annotation (`hold`) keep theirs by uid
    _devices: dict[_Hold, PodDevices] = field(default_factory=dict, repr=False)
    _read: dict[str, PodDevices] = field(default_factory=dict, repr=False)

    # ---- changes --------------------------------------------------------------------------------------------
    def hold(self, uid: str, devices: PodDevices, kind: int = HELD, group: str = "",
             rules: frozenset[int] = frozenset()) -> list[str]:
        """Record a pod's assignment (from its annotation); returns the entries naming no card of this node or a
        MIG slot the card's geometries do not have, which are not counted."""
        problems: list[str] = []
        holdings: list[Holding] = []
        by_uuid = {c.uuid: c.index for c in self.cards.cards}
        for container in devices:
            for use in container:
                index = by_uuid.get(use.card_uuid)
                if index is None:
                    problems.append(f"card {use.card_uuid} is not registered on node {self.cards.node}")
                    continue
                try:
                    slot = self._slot(index, use)
                except ValueError as exc:
                    problems.append(str(exc))
                    continue
                holdings.append(Holding(index, use.memory, use.cores, slot))
        self._put(uid, _Hold(kind, tuple(holdings), group, rules))
        self._read[uid] = devices
        return problems

    def _slot(self, index: int, use: CardUse) -> tuple[int, int] | None:
        """The (group index, position) a MIG slice id names on card `index`; ValueError if the card's geometries
        have no such group."""
        slot = use.mig_slot()
        if slot is None or self.cards.cards[index].mode != MIG:
            return None
        group = group_index(self.cards.geometries[index], slot[0])
        if group is None:
            raise ValueError(f"MIG slice {use.uuid} is not in card {index}'s geometries")
        return group, slot[1]

    def hold_fit(self, uid: str, fit: Fit, kind: int, group: str = "",
                 rules: frozenset[int] = frozenset()) -> None:
        """Record a fit as the pod's holdings (its assignment on this node's cards: `devices_of`)."""
        shared = self.shared
        if shared is None:
            shared = self.shared = Signatures()
        quick = (id(fit), kind, group, rules)
        found = shared.by_fit.get(quick)
        if found is not None and found[0] is fit:
            hold = found[1]
        else:
            key = (kind, fit.holdings, fit.types, group, rules)
            made = shared.holds.get(key)
            if made is None:
                made = shared.holds[key] = _Hold(kind, fit.holdings, group, rules, fit.types, fit.sizes)
            hold = made
            shared.by_fit[quick] = (fit, hold)
        self._put(uid, hold)
        if self._read:
            self._read.pop(uid, None)

    def _put(self, uid: str, hold: _Hold) -> None:
        old = self.pods.pop(uid, None)
        self._changed()
        if old is not None:
            self._note(-1, old)
        self.pods[uid] = hold
        self._note(1, hold)

    def release(self, uid: str) -> PodDevices | None:
        """Forget a pod's holdings (it ended, or a placement was undone)."""
        hold = self.pods.pop(uid, None)
        if hold is None:
            return None
        devices = self._devices_of(uid, hold)
        self._read.pop(uid, None)
        self._changed()
        self._note(-1, hold)
        return devices

    def set_kind(self, uid: str, kind: int) -> None:
        hold = self.pods.get(uid)
        if hold is not None and hold.kind != kind:
            self._changed()
            self._note(-1, hold)
            hold = self.pods[uid] = _Hold(kind, hold.holdings, hold.group, hold.rules, hold.types, hold.sizes)
            self._note(1, hold)

    def _note(self, sign: int, hold: _Hold) -> None:
        """List a change for the next numbering (`Signatures`): holdings added (+1) or taken away (-1)."""
        if self._base_id < 0:
            return
        pending = self._pending
        if len(pending) >= PENDING_MAX:
            self._base_id = -1
            return
        pending.append((sign, hold.kind, hold.holdings))

    def kind_of(self, uid: str) -> int | None:
        hold = self.pods.get(uid)
        return None if hold is None else hold.kind

    def devices_of(self, uid: str) -> PodDevices | None:
        """The pod's assignment on these cards, None when it holds none here."""
        hold = self.pods.get(uid)
        return None if hold is None else self._devices_of(uid, hold)

    def _devices_of(self, uid: str, hold: _Hold) -> PodDevices:
        read = self._read.get(uid)
        return read if read is not None else self.assignment(hold)

    def assignment(self, hold: _Hold) -> PodDevices:
        """The assignment a placed hold (`hold_fit`'s) makes on these cards, made once per hold and node."""
        devices = self._devices.get(hold)
        if devices is None:
            devices = self._devices[hold] = _assignment(self.cards, hold.holdings, hold.sizes, hold.types)
        return devices

    def _changed(self) -> None:
        self.version += 1
        self._signature = None
        if self._signature_id >= 0:  # the changes from here on are listed against the number it had
            self._base_id = self._signature_id
            self._pending.clear()
            self._signature_id = -1

    # ---- reading --------------------------------------------------------------------------------------------
    def usage(self, kinds: tuple[int, ...] = NOW) -> _Usage:
        n = len(self.cards.cards)
        usage = _Usage([0] * n, [0] * n, [0] * n, [set() for _ in range(n)], [None] * n)
        for hold in self.pods.values():
            if hold.kind not in kinds:
                continue
            for h in hold.holdings:
                usage.memory[h.card] += h.memory
                usage.cores[h.card] += h.cores
                usage.pods[h.card] += 1
                if h.slot is not None:
                    usage.groups[h.card] = h.slot[0]
                    usage.slots[h.card].add(h.slot[1])
        return usage

    def signature(self) -> tuple[object, ...]:
        """Everything a fit reads except the pods' groups and rules: equal signatures, equal fits."""
        if self._signature is None:
            items = sorted(item for hold in self.pods.values() for item in _items(hold))
            self._signature = (self.cards.shape, tuple(items))
        return self._signature

    def signature_id(self, table: Signatures) -> int:
        """The signature's number in `table`, so keys built from it hash in constant time however many pods the
        node holds."""
        found = self._signature_id
        if found >= 0:
            return found
        move = None
        if self._base_id >= 0 and self._pending:
            move = (self._base_id, tuple(self._pending))
            found = table.moves.get(move, -1)
        if found < 0:
            ids = table.ids
            found = ids.setdefault(self.signature(), len(ids))
            if move is not None:
                table.moves[move] = found
        self._signature_id = self._base_id = found
        self._pending.clear()
        return found

    def fit_key(self, ask: DeviceAsk, interned: Signatures | None = None) -> Hashable:
        """What `fit(ask, …)` reads of this node, in both views: equal keys, equal fits (up to card names). With
        `interned`, the signature is given by its number there."""
        signature: Hashable = self.signature() if interned is None else self.signature_id(interned)
        if ask.plain:
            return signature
        parts: list[Hashable] = [signature]
        if ask.filters_uuids:
            parts.append(tuple(c.uuid for c in self.cards.cards))
        if ask.spread_group:
            parts.append((self.cards_with(NOW, ask.spread_group), self.cards_with(FUTURE, ask.spread_group)))
        if ask.rules:
            parts.append((self.cards_with(NOW, rules=ask.rules), self.cards_with(FUTURE, rules=ask.rules)))
        return tuple(parts)

    def check(self, devices: PodDevices, exclude: str = "") -> list[str]:
        """Why `devices` cannot be added to the cards as they are held now (every holding but `exclude`'s): a card
        the node does not have, a MIG slice in use or unknown, or a card left over its memory, split or cores.
        Empty when they can (the simulated kubelet's check, and the bind's check of a planned assignment)."""
        scratch = CardLedger(self.cards, {uid: hold for uid, hold in self.pods.items() if uid != exclude})
        taken = {(h.card, h.slot) for hold in scratch.pods.values() for h in hold.holdings if h.slot is not None}
        problems = scratch.hold("\0check", devices)
        added = scratch.pods["\0check"].holdings
        problems += [f"MIG slice {h.slot} of card {h.card} is already in use" for h in added
                     if h.slot is not None and (h.card, h.slot) in taken]
        usage = scratch.usage(NOW)
        for index in sorted({h.card for h in added}):
            card = self.cards.cards[index]
            if usage.memory[index] > card.memory:
                problems.append(f"card {card.uuid} would hold {usage.memory[index]} MB of {card.memory}")
            if usage.pods[index] > card.split:
                problems.append(f"card {card.uuid} would be shared by {usage.pods[index]} pods, split {card.split}")
            if usage.cores[index] > 100:
                problems.append(f"card {card.uuid} would give out {usage.cores[index]} % of its cores")
        return problems

    def cards_with(self, kinds: tuple[int, ...], group: str = "",
                   rules: frozenset[int] = frozenset()) -> frozenset[int]:
        """Cards holding, in the view `kinds`, some memory or cores of a pod of PodGroup `group` (Volcano's
        `deviceHasPodFromSameGroup`), or any share of a pod of one of the exclusivity `rules`."""
        found: set[int] = set()
        for hold in self.pods.values():
            if hold.kind not in kinds:
                continue
            if group and hold.group == group:
                found.update(h.card for h in hold.holdings if h.memory > 0 or h.cores > 0)
            if rules and hold.rules & rules:
                found.update(h.card for h in hold.holdings)
        return frozenset(found)

    # ---- fitting --------------------------------------------------------------------------------------------
    def fit(self, ask: DeviceAsk, kinds: tuple[int, ...], policy: str, memory_factor: int = 1) -> Fit | Shortfall:
        """Where the pod's asks go on this node in the view `kinds`, or why they do not."""
        node = self.cards
        if ask.mode and ask.mode != node.mode:
            return Shortfall("mode", f"node is in vGPU mode {node.mode}, the pod asks for {ask.mode}")
        usage = self.usage(kinds)
        blocked = self.cards_with(kinds, ask.spread_group) if ask.spread_group else frozenset()
        exclusive = self.cards_with(kinds, rules=ask.rules) if ask.rules else frozenset()
        holdings: list[Holding] = []
        score = 0.0
        for container in ask.containers:
            if container.nums > len(node.cards):
                return Shortfall("cards", f"node has {len(node.cards)} cards, a container asks for {container.nums}")
            chosen, shortfall = self._container(ask, container, usage, blocked, exclusive, policy, memory_factor)
            if shortfall is not None:
                return shortfall
            holdings.extend(h for h, _ in chosen)
            score += sum(s for _, s in chosen)
        sizes = tuple(c.nums for c in ask.containers)
        return Fit(tuple(holdings), sizes, tuple(c.type for c in ask.containers), score)

    def _container(self, ask: DeviceAsk, container: ContainerAsk, usage: _Usage, blocked: frozenset[int],
                   exclusive: frozenset[int], policy: str, factor: int,
                   ) -> tuple[list[tuple[Holding, float]], Shortfall | None]:
        node = self.cards
        chosen: list[tuple[Holding, float]] = []
        allowed = False
        best: tuple[int, int] | None = None  # (free MB, -card) of the closest card the pod may use
        need = 0
        for i in _order(usage, len(node.cards), policy):
            card = node.cards[i]
            if not ask.uuid_ok(card.uuid):
                continue
            allowed = True
            memory = container.memory_on(card.memory)
            need = max(need, memory)
            free = card.memory - usage.memory[i]
            if not card.health or usage.pods[i] >= card.split or i in blocked or not ask.type_ok(card.type):
                continue
            if i in exclusive and card.mode == HAMI_CORE:
                continue
            if not _cores_fit(usage.cores[i], usage.pods[i], container.cores):
                continue
            if best is None or (free, -i) > best:
                best = (free, -i)
            if free < memory:
                continue
            use = self._take(i, container, memory, usage, factor, policy)
            if use is None:
                continue
            chosen.append(use)
            if len(chosen) == container.nums:
                return chosen, None
        if ask.filters_uuids and not allowed:
            return chosen, Shortfall("uuid", "no card matches the pod's UUID constraints")
        closest = None if best is None else -best[1]
        free = 0 if best is None else best[0]
        want = f"{container.nums} cards" if container.nums > 1 else "a card"
        return chosen, Shortfall("room", f"no room for {want} with {need} MB", closest, free, need)

    def _take(self, i: int, container: ContainerAsk, memory: int, usage: _Usage, factor: int,
              policy: str) -> tuple[Holding, float] | None:
        """Put one container's share on card `i` in `usage`: the holding and the card's score."""
        card = self.cards.cards[i]
        was_idle = usage.pods[i] == 0
        slot: tuple[int, int] | None = None
        if card.mode == MIG:
            geometries = self.cards.geometries[i]
            request = memory * factor if factor > 1 else memory
            found = pick_slice(geometries, usage.groups[i], usage.slots[i], request)
            if found is None:
                return None
            memory = found.memory // factor if factor > 1 else found.memory
            slot = (found.group, found.position)
            usage.groups[i] = found.group
            usage.slots[i].add(found.position)
        usage.memory[i] += memory
        usage.cores[i] += container.cores
        usage.pods[i] += 1
        return Holding(i, memory, container.cores, slot), _score(policy, usage.memory[i], card.memory, was_idle)

    def summary(self, kinds: tuple[int, ...] = NOW) -> list[tuple[int, int, int, int]]:
        """Per card: (memory in use MB, memory MB, pods, split), for reports."""
        n = len(self.cards.cards)
        memory, pods = [0] * n, [0] * n
        for hold in self.pods.values():
            if hold.kind in kinds:
                for h in hold.holdings:
                    memory[h.card] += h.memory
                    pods[h.card] += 1
        return [(memory[i], c.memory, pods[i], c.split) for i, c in enumerate(self.cards.cards)]


def _cores_fit(used: int, pods: int, cores: int) -> bool:
    """Compute stays within 100 %; an ask of 100 wants a card no pod uses, an ask of 0 no card fully taken."""
    return used + cores <= 100 and not (cores == 100 and pods) and not (used == 100 and not cores)


def _score(policy: str, used: int, card_memory: int, was_idle: bool) -> float:
    """Volcano's `GPUScore` for one card given: binpack, its memory in use once the pod is on it; spread, whether
    it was unused."""
    if policy == BINPACK:
        return MULTIPLIER * used / card_memory if card_memory > 0 else 0.0
    if policy == SPREAD:
        return MULTIPLIER if was_idle else 0.0
    return 0.0


def _order(usage: _Usage, n: int, policy: str) -> list[int]:
    if policy == BINPACK:
        return sorted(range(n), key=lambda i: (-usage.memory[i], i))
    if policy == SPREAD:
        return sorted(range(n), key=lambda i: (usage.pods[i], i))
    return list(range(n - 1, -1, -1))


__all__ = ["BINPACK", "FUTURE", "HELD", "NOW", "PIPELINED", "RELEASING", "SPREAD", "CardLedger", "Fit", "Holding",
           "Shortfall", "Signatures"]
