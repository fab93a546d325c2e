"""Where the pods that pod affinity terms and spread constraints select are, kept up to date through a session.

The counterpart of what kube-scheduler's InterPodAffinity and PodTopologySpread compute in PreFilter / PreScore
from every NodeInfo's pods (`topologyToMatchedTermCount`, `TpValueToMatchNum`) and of Volcano's predicates plugin
feeding each allocation and deallocation into its NodeInfos. Here each node has a domain per topology key
(`Domains`), and a `PodCounts` keeps, for every selector registered when the session opens, how many placed pods
it selects per domain of one key (or per node), and for every term the placed pods *carry*, how many carriers sit
in each domain. Pods count where they sit: bound and running pods of the snapshot, and what allocate, pipeline,
evict and discard change (the session's event handler calls `add` and `remove`). A pod evicted in the session is
terminating, as one the snapshot shows being deleted: it still counts for pod affinity (kube-scheduler keeps
terminating pods in its NodeInfo until they are gone) and no longer for spread (which skips them). A pod's labels
find the selectors it may match through an index on one label each selector pins (`Selection`), so placing a pod
no term selects costs a few dictionary lookups.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from extender.engine.model import Job, Node, Task, TaskStatus
from lapilli.podterms import AffinityTerm, PodSelector, PodTerms

Counts = npt.NDArray[np.int64]
Ids = npt.NDArray[np.intp]
Flags = npt.NDArray[np.bool_]


class Pod(Protocol):
    """What of a pod the index reads (a session `Task` is one)."""

    @property
    def uid(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def namespace_labels(self) -> Mapping[str, str]: ...

    @property
    def terms(self) -> PodTerms | None: ...

    @property
    def status(self) -> TaskStatus: ...

    @property
    def node(self) -> str | None: ...


def session_pods(jobs: Mapping[str, Job], nodes: Sequence[Node]) -> Iterator[Task]:
    """Every pod of a session once: the gangs' members, then the pods on nodes that belong to no gang."""
    for job in jobs.values():
        yield from job.tasks.values()
    for node in nodes:
        yield from (t for t in node.tasks.values() if not t.job)


# ---- topology domains ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KeyDomains:
    """The nodes' domains for one topology key: `ids[row]` in 0..count-1, or `count` where the node lacks it.

    A key whose every domain is one node (`kubernetes.io/hostname`: `singletons`) keeps its counts per node, so a
    node's count needs no lookup; otherwise per domain, then one slot (always 0) for nodes without the key."""

    key: str
    ids: Ids
    count: int
    has: Flags
    singletons: bool

    @property
    def slots(self) -> int:
        return len(self.ids) if self.singletons else self.count + 1

    def slot(self, row: int) -> int:
        return row if self.singletons else int(self.ids[row])

    def per_node(self, slot_counts: Counts) -> Counts:
        """Counts kept over `slots` (a counter's), seen from each node (0 where it lacks the key); read only."""
        return slot_counts if self.singletons else slot_counts[self.ids]

    def from_domains(self, domain_values: Counts) -> Counts:
        """Values per domain (then the "no label" slot), seen from each node."""
        return domain_values[self.ids]

    def present(self, nodes: Flags) -> Flags:
        """Per domain (then the "no label" slot, False): whether one of `nodes` is in it."""
        out = np.bincount(self.ids[nodes], minlength=self.count + 1) > 0
        out[self.count] = False
        return out


class Domains:
    """Each topology key's domains over the session's nodes, built on first use."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = nodes
        self._keys: dict[str, KeyDomains] = {}

    def of(self, key: str) -> KeyDomains:
        found = self._keys.get(key)
        if found is None:
            values: dict[str, int] = {}
            raw = [values.setdefault(v, len(values)) if (v := n.labels.get(key)) is not None else -1
                   for n in self.nodes]
            ids = np.array(raw, dtype=np.intp)
            has = ids >= 0
            ids[~has] = len(values)
            found = self._keys[key] = KeyDomains(key, ids, len(values), has, len(values) == int(has.sum()))
        return found


# ---- what a count selects ----------------------------------------------------------------------------------------
class Matcher(Protocol):
    def matches(self, pod: Pod) -> bool: ...

    def anchor(self) -> tuple[str, frozenset[str]] | None: ...


@dataclass(frozen=True, slots=True)
class TermMatch:
    """Pods one affinity term selects."""

    term: AffinityTerm

    def matches(self, pod: Pod) -> bool:
        return self.term.matches(pod.namespace, pod.labels, pod.namespace_labels)

    def anchor(self) -> tuple[str, frozenset[str]] | None:
        return self.term.selector.anchor()


@dataclass(frozen=True, slots=True)
class AllTerms:
    """Pods every one of a pod's required affinity terms selects (kube-scheduler counts a pod for a pod's affinity
    only when it matches all of its terms)."""

    terms: tuple[AffinityTerm, ...]

    def matches(self, pod: Pod) -> bool:
        return all(t.matches(pod.namespace, pod.labels, pod.namespace_labels) for t in self.terms)

    def anchor(self) -> tuple[str, frozenset[str]] | None:
        return next((a for t in self.terms if (a := t.selector.anchor()) is not None), None)


@dataclass(frozen=True, slots=True)
class SpreadMatch:
    """Pods a spread constraint counts: its selector, in the namespace of the pod that carries it; an empty
    selector counts none (podtopologyspread's `countPodsMatchSelector`, which also skips terminating pods: register
    its counter with `terminating=False`)."""

    namespace: str
    selector: PodSelector

    def matches(self, pod: Pod) -> bool:
        return pod.namespace == self.namespace and not self.selector.empty and self.selector.matches(pod.labels)

    def anchor(self) -> tuple[str, frozenset[str]] | None:
        return self.selector.anchor()


M = TypeVar("M", bound=Matcher)


class Selection(Generic[M]):
    """Matchers by the label one of their requirements pins, to find the ones a pod may match from its labels."""

    def __init__(self) -> None:
        self.items: list[M] = []
        self._ids: dict[M, int] = {}
        self._anchored: dict[str, dict[str, list[int]]] = {}
        self._loose: list[int] = []  # matchers that pin no label: asked of every pod

    def add(self, matcher: M) -> int:
        found = self._ids.get(matcher)
        if found is not None:
            return found
        i = self._ids[matcher] = len(self.items)
        self.items.append(matcher)
        anchor = matcher.anchor()
        if anchor is None:
            self._loose.append(i)
        else:
            key, values = anchor
            by_value = self._anchored.setdefault(key, {})
            for value in values:
                by_value.setdefault(value, []).append(i)
        return i

    def __bool__(self) -> bool:
        return bool(self.items)

    def matching(self, pod: Pod) -> list[int]:
        """The matchers that select `pod`, in the order they were added."""
        found: list[int] = [i for i in self._loose if self.items[i].matches(pod)]
        anchored = self._anchored
        if anchored:
            for key, value in pod.labels.items():
                by_value = anchored.get(key)
                if by_value is not None:
                    found.extend(i for i in by_value.get(value, ()) if self.items[i].matches(pod))
        if len(found) > 1:
            found = sorted(set(found))
        return found


# ---- counts ------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Counter:
    domains: KeyDomains | None  # counts per domain of this key; None: per node
    counts: Counts
    terminating: bool  # terminating pods (Releasing) count


class Extract(Protocol):
    """The terms of a kind a pod carries (say its required anti-affinity terms)."""

    def __call__(self, terms: PodTerms, /) -> Iterable[Hashable]: ...


class PodCounts:
    """Placed pods counted per domain (or node) for the registered matchers, and the carriers of registered terms.

    Register everything (`register`, `carry` + `register_carried`) before the first `add`."""

    def __init__(self, nodes: Sequence[Node], domains: Domains) -> None:
        self.domains = domains
        self.rows = {n.name: n.idx for n in nodes}
        self.size = len(nodes)
        self.selection: Selection[Matcher] = Selection()
        self._counters: list[_Counter] = []
        self._by_matcher: list[list[int]] = []  # matcher id -> counter ids
        self._kinds: dict[str, Extract] = {}
        self._idents: dict[Hashable, int] = {}
        self._selected: dict[str, list[int]] = {}  # uid -> matchers selecting it
        self._last: tuple[str, Mapping[str, str], list[int]] | None = None
        self._matches: dict[str, tuple[int, ...]] = {}  # uid -> counters its placement moves
        self._placed: dict[str, tuple[int, tuple[int, ...]]] = {}  # uid -> (row, counters) while counted
        self.version = 0  # moves on every change of a count

    def __bool__(self) -> bool:
        return bool(self._counters)

    # ---- registration ------------------------------------------------------------------------------------------
    def register(self, matcher: Matcher, key: str | None, terminating: bool = True) -> int:
        """A counter of the pods `matcher` selects, per domain of `key` (per node when None); `terminating`:
        whether pods being deleted count."""
        m = self.select(matcher)
        return self._counter(("m", m, key, terminating), key, terminating, self._by_matcher[m])

    def carry(self, kind: str, extract: Extract) -> None:
        """Pods carry terms of `kind`: `extract` names them from a pod's terms."""
        self._kinds[kind] = extract

    def register_carried(self, kind: str, term: Hashable, key: str) -> int:
        """A counter of the placed pods that carry `term` (of `kind`), per domain of `key`."""
        return self._counter((kind, term), key, True, None)

    def carrier(self, kind: str, term: Hashable) -> int | None:
        """The counter of the carriers of `term`, if one is registered."""
        return self._idents.get((kind, term))

    def _counter(self, ident: Hashable, key: str | None, terminating: bool, owners: list[int] | None) -> int:
        found = self._idents.get(ident)
        if found is not None:
            return found
        domains = None if key is None else self.domains.of(key)
        size = self.size if domains is None else domains.slots
        c = self._idents[ident] = len(self._counters)
        self._counters.append(_Counter(domains, np.zeros(size, dtype=np.int64), terminating))
        if owners is not None:
            owners.append(c)
        return c

    def counts(self, counter: int) -> Counts:
        """Over the slots of the counter's key (`KeyDomains.per_node` turns them into per-node), or per node."""
        return self._counters[counter].counts

    def domains_of(self, counter: int) -> KeyDomains:
        """The domains a keyed counter counts over."""
        domains = self._counters[counter].domains
        assert domains is not None, "a per-node counter has no domains"
        return domains

    def select(self, matcher: Matcher) -> int:
        """Add a matcher only to be asked which pods it selects (`selected`), with no counter of its own."""
        m = self.selection.add(matcher)
        while len(self._by_matcher) <= m:
            self._by_matcher.append([])
        return m

    def selected(self, pod: Pod) -> list[int]:
        """The matchers that select `pod` (asked once per pod: placements and the parts share the answer; a gang's
        members, asked one after the other with equal labels, share one matching)."""
        found = self._selected.get(pod.uid)
        if found is None:
            last = self._last
            if last is not None and last[0] == pod.namespace and last[1] == pod.labels:
                found = last[2]
            else:
                found = self.selection.matching(pod)
                self._last = (pod.namespace, pod.labels, found)
            self._selected[pod.uid] = found
        return found

    def matters(self, pod: Pod) -> bool:
        """Whether `pod` carries terms or some registered matcher selects it. When not, its placements move no
        count: that is remembered, so the session's events about it cost one lookup."""
        if pod.terms is None and not self.selected(pod):
            self._matches[pod.uid] = ()
            return False
        return True

    # ---- moves -------------------------------------------------------------------------------------------------
    def _moved_by(self, pod: Pod) -> tuple[int, ...]:
        found = self._matches.get(pod.uid)
        if found is None:
            selected = self.selected(pod)
            if not selected and pod.terms is None:  # most pods: nothing selects them and they carry nothing
                self._matches[pod.uid] = ()
                return ()
            ids = [c for m in selected for c in self._by_matcher[m]]
            if pod.terms is not None:
                for kind, extract in self._kinds.items():
                    ids.extend(c for term in extract(pod.terms) if (c := self._idents.get((kind, term))) is not None)
            found = self._matches[pod.uid] = tuple(ids)
        return found

    def placed(self, pod: Pod) -> None:
        """The session's allocate event: `pod` is now on `pod.node`."""
        counters = self._matches.get(pod.uid)
        if counters is None:
            counters = self._moved_by(pod)
        if counters:
            self.add(pod, pod.node)

    def add(self, pod: Pod, node: str | None) -> None:
        """`pod` is now on `node`: a session placement, where it was found, or an eviction taken back."""
        counters = self._moved_by(pod)
        if not counters:
            return
        record = self._placed.get(pod.uid)
        row = record[0] if record is not None else self.rows.get(node or "")
        if row is None:
            return
        if pod.status is TaskStatus.RELEASING:
            counters = tuple(c for c in counters if self._counters[c].terminating)
        have = record[1] if record is not None else ()
        added = tuple(c for c in counters if c not in have)
        self._placed[pod.uid] = (row, have + added)
        self._shift(row, added, 1)

    def remove(self, pod: Pod) -> None:
        """`pod` left its node (taken back), or is being evicted (Releasing): a terminating pod still counts where
        terminating pods do (pod affinity), as it would for kube-scheduler until it is gone."""
        record = self._placed.pop(pod.uid, None)
        if record is None:
            return
        row, have = record
        if pod.status is TaskStatus.RELEASING:
            kept = tuple(c for c in have if self._counters[c].terminating)
            if kept:
                self._placed[pod.uid] = (row, kept)
            have = tuple(c for c in have if c not in kept)
        self._shift(row, have, -1)

    def _shift(self, row: int, counters: Iterable[int], delta: int) -> None:
        for c in counters:
            counter = self._counters[c]
            if counter.domains is None:
                counter.counts[row] += delta
            elif counter.domains.has[row]:  # a node without the key is in no domain of it
                counter.counts[counter.domains.slot(row)] += delta
        self.version += 1


__all__ = [
    "AllTerms",
    "Domains",
    "Extract",
    "KeyDomains",
    "Matcher",
    "Pod",
    "PodCounts",
    "Selection",
    "SpreadMatch",
    "TermMatch",
    "session_pods",
]
