"""What each extender verb decides, over the cluster state, the plan and the latest session outcome.

* filter — pods outside any PodGroup pass (a `volcano` pod after its queue's checks: it exists, is Open and has
  capability left), as do admitted gangs of one: a `volcano` pod gets the offered node the conf's node order puts
  first (`pick`), as a session would place it, and every offered node where that order needs more than the
  nodes' numbers (pods of other schedulers always); a gang member gets its planned node alone
  (kube-scheduler drops the nodes a reply leaves out, so a 5,000-node answer stays small), or (when
  kube-scheduler did not offer it) another offered node it fits, or — when its gang has no plan — every node
  fails with one short reason (`gang ns/pg: 3/4 pods placeable`) that kube-scheduler shows in the pod's events.
* prioritize — the planned node scores 10; otherwise GPU-weighted binpack mapped to 0–9, both given relative to the
  lowest score the session sees (nodes at that score are left out: kube-scheduler counts them as 0, same ranking).
* bind — gang members are parked in the permit cache until `minMember` of them can be bound together.
* preempt — kube-scheduler's victim sets are kept only when they break no gang below `minMember`, spare pods
  marked `volcano.sh/preemptable: "false"`, and take nothing from a queue within its deserved share.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Container, Mapping
from typing import Any, Final

import numpy as np

from extender.engine.conf import SchedulerConf
from extender.engine.plugins.binpack import BinpackArgs, binpack_score, binpack_terms
from extender.engine.results import resource_units
from extender.engine.rowmath import VECTOR, MatrixRows
from extender.engine.status import Code, Status
from extender.service import pick, placecheck
from extender.service.bindcheck import Refusal, names_refusal, node_refusal, pod_refusal, room_refusal
from extender.service.cards import NO_CARDS, CardBook
from extender.service.loop import SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.permit import PermitCache
from extender.service.plan import Plan
from extender.service.session import UNRESOLVED, WAITING, Outcome, row_names
from extender.service.state import ClusterState
from extender.service.wire import (
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    MetaPod,
    MetaVictims,
    filter_refusal,
    filter_result,
)
from lapilli.api.constants import (
    DEFAULT_QUEUE,
    DEFAULT_SCHEDULER_NAME,
    GROUP_NAME_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
)
from lapilli.devices.assign import PodDevices, assignment_annotations
from lapilli.devices.cards import Fit
from lapilli.kube import REQUEST_ERRORS, KubeClient
from lapilli.kube.errors import ApiError, Conflict, NotFound
from lapilli.kube.resources import PODS
from lapilli.meta import annotations_of, meta, name_of, namespace_of, resource_version, uid_of
from lapilli.plainpods import group_of
from lapilli.resources.units import CPU, GPU, MEMORY, pod_request
from lapilli.resources.vector import TOLERANCE

NOT_SYNCED = "lapilli: the cluster cache is not synced yet; retry"
# Bind refusals a later plan answers (`Extender._refused`).
REPLANNED: Final = frozenset({"not-synced", "not-planned", "no-card-room"})
PROMISED = "its free room is promised to a gang whose victims are leaving"
MAX_SCORE = 10
# Prioritize packs GPUs first: the binpack plugin with a GPU counting ten times cpu or memory.
PRIORITIZE_BINPACK: Final = BinpackArgs(weight=1.0, weights=((CPU, 1.0), (MEMORY, 1.0), (GPU, 10.0)))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _failure(exc: BaseException) -> str:
    """One line for a failed request: the API server's own words, else the class too (a bare `TimeoutError`
    or `ServerDisconnectedError` says nothing without it)."""
    return _one_line(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {_one_line(exc)}"


def _same_room(a: Outcome, a_idle: np.ndarray, b: Outcome) -> bool:
    """Room `a_idle` over outcome `a`'s nodes is what session outcome `b` leaves, so prioritize's tables carry
    over (a settled cluster: sessions keep coming, the answer does not change, and rebuilding a table costs a
    verb's tail)."""
    return (a.dims.index == b.dims.index and (a.node_index is b.node_index or a.node_index == b.node_index)
            and np.array_equal(a_idle, b.idle) and np.array_equal(a.allocatable, b.allocatable))


class Extender:
    def __init__(
        self,
        state: ClusterState,
        plan: Plan,
        loop: SessionLoop,
        permit: PermitCache,
        client: KubeClient,
        metrics: ExtenderMetrics,
        scheduler_names: Collection[str] = (DEFAULT_SCHEDULER_NAME,),
    ) -> None:
        self.state, self.plan, self.loop, self.permit = state, plan, loop, permit
        self.client, self.metrics = client, metrics
        self.scheduler_names = frozenset(scheduler_names)  # pods of these get queue checks without a PodGroup
        self._units_cache: dict[tuple[str, str], Mapping[str, float]] = {}
        # Prioritize's score tables, per request vector, for one session outcome.
        self._tables_for: Outcome | None = None
        self._tables: dict[bytes, tuple[dict[str, dict[str, Any]], int]] = {}
        self._names: list[str] = []
        # Each node's room as the verbs see it: the latest outcome's, less what filter's re-plans moved since. The
        # outcome itself is never changed (the next outcome is compared with it): the first move copies its room.
        self._moved_for: Outcome | None = None
        self._moved = np.zeros((0, 0))
        # Filter's pick for a pod without a plan: the conf's node order, and what in the cluster rules a pick out.
        self._order_for: SchedulerConf | None = None
        self._order = pick.NodeOrder((), (), False)
        self._picks = pick.PickTables()
        self._cluster_terms = pick.ClusterTerms(state.snapshot)
        state.listeners.append(self._cluster_terms.observe)
        self._inflight: dict[str, str] = {}  # pod key -> node of a single pod's bind on its way to the API server
        # vGPU cards as the verbs see them now (bound pods' assignments, the plan, binds on their way), re-read
        # for a node when a pod on it, the node, or the plan there changes.
        self.book = CardBook(state, plan)
        state.node_listeners.append(self.book.touch)
        state.settled_listeners.append(self.book.release)  # a bound pod's own annotation holds its cards now
        plan.on_node = self.book.touch

    def _meta(self, pod: Mapping[str, Any]) -> tuple[str, str, str | None]:
        """(namespace, name, "namespace/PodGroup" or None). A pod of ours that names no PodGroup yet is in the one
        the PodGroup controller gives it once that exists (`ClusterState` counts it there too); before, it passes
        as a pod of no PodGroup, after its queue's checks."""
        namespace = namespace_of(pod) or "default"
        group = annotations_of(pod).get(GROUP_NAME_ANNOTATION)
        if not group:
            group = group_of(pod, self.scheduler_names)
            if group and f"{namespace}/{group}" not in self.state.snapshot.podgroups:
                group = ""
        return namespace, name_of(pod), f"{namespace}/{group}" if group else None

    # ---- filter ---------------------------------------------------------------------------------------------
    def filter(self, args: ExtenderArgs) -> ExtenderFilterResult:
        offered = args.names()
        if not self.state.synced:
            return filter_result(error=NOT_SYNCED)
        namespace, name, gang = self._meta(args.pod)
        key = f"{namespace}/{name}"
        if gang is None:
            refusal = self._plain_refusal(args.pod)
            if refusal is None:
                return self._unplanned(args.pod, offered)
            return filter_refusal(offered, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"pod {key}: {refusal}"))
        node = self.plan.node_for(key)
        if node is not None and node in offered:
            return filter_result([node])
        if node is None and self._admitted_single(gang, args.pod):
            return self._unplanned(args.pod, offered, self._unpromised(args.pod, offered))
        if node is not None:
            moved = self._replan(args.pod, key, node, offered)
            if moved is not None:
                return filter_result([moved])
            self.plan.drop(gang)
            why = Status(UNRESOLVED, f"planned node {node} was not offered and no offered node fits; re-planning")
        else:
            latest = self.loop.latest
            why = (latest.reasons.get(gang) if latest is not None else None) or WAITING
        self.loop.waiting.add(key)
        self.loop.poke()
        return filter_refusal(offered, Status(why.code, f"gang {gang}: {why.message}"))

    def _cards(self) -> CardBook:
        """The card book, following the conf the sessions run."""
        self.book.configure(self.loop.conf.conf)
        return self.book

    def _unplanned(self, pod: Mapping[str, Any], offered: list[str],
                   refused: dict[str, str] | None = None) -> ExtenderFilterResult:
        """A pod that passes without a plan: the one node a session would give it (`pick`), else every offered
        node it may use (`_card_filter`)."""
        book = self._cards()
        if not (book.active and book.ask(pod) is not None):
            node = self._pick(pod, [n for n in offered if n not in refused] if refused else offered)
            if node is not None:
                return filter_result([node])
        return self._card_filter(pod, offered, refused)

    def _pick(self, pod: Mapping[str, Any], offered: list[str]) -> str | None:
        if len(offered) < 2 or (pod.get("spec") or {}).get("schedulerName") not in self.scheduler_names:
            return None
        node = self._first_in_order(pod, offered)
        self.metrics.picks.labels("picked" if node is not None else "passed").inc()
        return node

    def _first_in_order(self, pod: Mapping[str, Any], offered: list[str]) -> str | None:
        latest = self.loop.latest
        if latest is None or pick.own_terms(pod) or self._cluster_terms.present():
            return None
        conf = self.loop.conf.conf
        if self._order_for is not conf:
            self._order_for, self._order = conf, pick.NodeOrder.of(conf)
        req = self._request(pod)
        if req is None or (self._order.topology and self.state.snapshot.hypernodes):
            return None
        node = self._picks.best(self._order, latest, self._room(latest), req, offered)
        if node is not None:
            self._take(latest, req, node)
        return node

    def _take(self, latest: Outcome, req: np.ndarray, node: str, planned: str | None = None) -> None:
        """Count `req` out of `node`'s room (and back into `planned`'s) until the next outcome."""
        if self._moved_for is not latest:
            self._moved_for, self._moved = latest, latest.idle.copy()
        row = latest.node_index[node]
        self._moved[row] -= req
        self._picks.moved(latest, self._moved, row)
        if planned is not None and planned in latest.node_index:
            row = latest.node_index[planned]
            self._moved[row] += req
            self._picks.moved(latest, self._moved, row)
        self._tables_for = None  # the room it counted has moved

    def _card_filter(self, pod: Mapping[str, Any], offered: list[str],
                     refused: dict[str, str] | None = None) -> ExtenderFilterResult:
        """A pod that passes without a plan: when it asks for vGPU cards, only the offered nodes with cards that
        fit it now (kube-scheduler's own filters see the totals in allocatable, not cards); never the nodes
        `refused` names (with their reasons)."""
        book = self._cards()
        ask = book.ask(pod) if book.active else None
        if refused:
            offered = [node for node in offered if node not in refused]
        if ask is None:
            return filter_result(offered, failed=refused)
        kept, failed = book.filter(ask, offered)
        failed.update(refused or {})
        return filter_result(kept, failed=failed)

    def _admitted_single(self, gang: str, pod: Mapping[str, Any]) -> bool:
        """A gang of one needs no plan: there is nothing to gather, and kube-scheduler's own filters have
        checked that it fits. Turning it away until a session plans it would cost a scheduling round trip and a
        back-off per pod. It passes once admitted (Inqueue/Running) to an Open queue, or while Pending when its
        queue would admit it now (`_queue_refusal`) on what enqueue weighs: the PodGroup's `minResources` when it
        sets them (Spark's driver PodGroup reserves its executors too), else the pod's request."""
        podgroup = self.state.snapshot.podgroups.get(gang)
        if podgroup is None or podgroup.min_member > 1:
            return False
        if podgroup.phase in ("Inqueue", "Running"):
            queue = self.state.snapshot.queues.get(podgroup.queue)
            return queue is not None and queue.state == "Open"
        request = podgroup.min_resources if podgroup.min_resources is not None else self._units(pod)
        return podgroup.phase in ("Pending", "") and self._queue_refusal(podgroup.queue, request) is None

    def _unpromised(self, pod: Mapping[str, Any], offered: list[str]) -> dict[str, str]:
        """The offered nodes whose room the last session promised to pipelined members (a gang that evicted for
        it waits for its victims to leave, `Outcome.promised`) and where the pod does not fit the rest: kube-
        scheduler sees the victims' room free as soon as they are gone, and a pod that needs no plan (a gang of
        one whose evicted pod was made again) would take it back before the next session places the gang."""
        latest = self.loop.latest
        if latest is None or not latest.promised:
            return {}
        req = self._request(pod)
        if req is None:
            return {}
        return {node: PROMISED for node in offered if node in latest.promised
                and not np.all(req < latest.promised[node] + TOLERANCE)}

    def _plain_refusal(self, pod: Mapping[str, Any]) -> str | None:
        """A pod of Volcano's scheduler that names no PodGroup yet (the controllers give it one shortly) passes
        untouched after the queue checks, with the queue its PodGroup will have; pods of other schedulers pass."""
        if (pod.get("spec") or {}).get("schedulerName") not in self.scheduler_names:
            return None
        queue = str(annotations_of(pod).get(QUEUE_NAME_ANNOTATION) or DEFAULT_QUEUE)
        return self._queue_refusal(queue, self._units(pod))

    def _queue_refusal(self, name: str, request: Mapping[str, float]) -> str | None:
        """Why `request` may not start in queue `name` now (None: it may). Enqueue's check, for one pod: the
        queue exists and is Open, and its capability holds what the last session counted in it plus `request`."""
        queue = self.state.snapshot.queues.get(name)
        if queue is None:
            return f"queue {name} does not exist"
        if queue.state != "Open":
            return f"queue {name} is {queue.state or 'not open yet'}"
        latest = self.loop.latest
        if latest is None:
            return "waiting for a scheduling session"
        computed = latest.queues.get(name)
        allocated = resource_units(latest.dims, computed.allocated) if computed is not None else {}
        for resource, limit in queue.capability.items():
            have = float(allocated.get(resource, 0))
            if limit > 0 and have + request.get(resource, 0.0) > limit:
                return f"queue {name} is at its {resource} capability"
        return None

    def _request(self, pod: Mapping[str, Any]) -> np.ndarray | None:
        """The pod's request over the latest session's resource dimensions (None before the first session)."""
        latest = self.loop.latest
        if latest is None:
            return None
        units = self._units(pod)
        return latest.dims.vector({k: v for k, v in units.items() if k in latest.dims.index})

    def _units(self, pod: Mapping[str, Any]) -> Mapping[str, float]:
        """The pod's request in Volcano units. Filter and prioritize ask about the same pod (same uid and
        resourceVersion) one after the other, and parsing quantities exactly is the costly part."""
        key = (uid_of(pod), resource_version(pod))
        if not key[0] or not key[1]:
            return pod_request(pod.get("spec") or {})
        units = self._units_cache.get(key)
        if units is None:
            if len(self._units_cache) >= 1024:
                self._units_cache.clear()
            units = self._units_cache[key] = pod_request(pod.get("spec") or {})
        return units

    def _replan(self, pod: Mapping[str, Any], key: str, planned: str, offered: list[str]) -> str | None:
        """Move one planned pod to another offered node it fits, keeping the rest of its gang's plan, and inside
        the HyperNode the session placed the gang in (network topology): never out of it."""
        latest = self.loop.latest
        req = self._request(pod)
        if latest is None or req is None:
            return None
        gang = self.plan.gangs.get(self.plan.gang_of_pod.get(key, ""))
        domain = gang.domain if gang is not None else None
        candidates = [n for n in offered if n in latest.node_index and (domain is None or n in domain)]
        if not candidates:
            return self._replanned(None)
        idx = np.array([latest.node_index[n] for n in candidates])
        fits = np.all(req < self._room(latest)[idx] + TOLERANCE, axis=1)
        book = self._cards()
        ask = book.ask(pod) if book.active else None
        cards: dict[str, Fit] = {}
        if ask is not None:
            for i, node in enumerate(candidates):
                fit = book.fit(ask, node, exclude=key) if fits[i] else None
                if isinstance(fit, Fit):
                    cards[node] = fit
                else:
                    fits[i] = False
        if not fits.any():
            return self._replanned(None)
        allowed = self._terms_allow(key, [n for n, fit in zip(candidates, fits, strict=True) if fit])
        fits &= np.array([n in allowed for n in candidates])
        if not fits.any():
            return self._replanned(None)
        scores = self._binpack(req, idx)
        scores[~fits] = -1
        best = candidates[int(np.argmax(scores))]
        self._take(latest, req, best, planned)
        self.plan.move(key, best, book.devices(cards[best], best) if best in cards else None)
        return self._replanned(best)

    def _terms_allow(self, key: str, fitting: list[str]) -> set[str]:
        """Of the nodes `fitting`, those the session's own evaluation of what depends on other pods (affinity,
        spread, ports) allows against the whole plan. A spread gang's members are checked by kube-scheduler one by
        one in an order of its own, so it may refuse one in a state the plan passes through differently (each order
        ends as even): where the plan leaves nowhere, such a member moves by kube-scheduler's own view (bound pods
        and those parked at bind)."""
        conf, snap = self.loop.conf.conf, self.state.snapshot
        allowed = set(placecheck.allowed(snap, self.plan.placements(), conf, key, fitting))
        if not allowed and placecheck.order_dependent(snap, key):
            seen = {**self.permit.placements(), **self._inflight}
            allowed = set(placecheck.allowed(snap, seen, conf, key, fitting))
        return allowed

    def _replanned(self, node: str | None) -> str | None:
        self.metrics.replans.labels("moved" if node is not None else "failed").inc()
        return node

    def _room(self, latest: Outcome) -> np.ndarray:
        """Each node's idle room over `latest`'s rows, with filter's re-plans since it counted."""
        return self._moved if self._moved_for is latest else latest.idle

    # ---- prioritize -----------------------------------------------------------------------------------------
    def _binpack(self, req: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The binpack plugin's score (`binpack_score`, GPU weighted) over nodes `idx`, scaled to 0–1: what
        the node's room would be once the pod is placed (0 where it does not fit)."""
        latest = self.loop.latest
        assert latest is not None
        terms = binpack_terms(PRIORITIZE_BINPACK, latest.dims.index, req)
        if terms is None:
            return np.zeros(len(idx))
        alloc = latest.allocatable[idx]
        rows = MatrixRows(alloc, alloc - self._room(latest)[idx])
        return np.asarray(binpack_score(VECTOR, rows, terms), dtype=np.float64) / 100.0

    def prioritize(self, args: ExtenderArgs) -> list[dict[str, Any]]:
        """`[{"Host", "Score"}]`, sparse. kube-scheduler adds `Score × weight × 10` to each node's total and
        counts a node left out as 0, so subtracting one constant from every score changes no ranking: scores are
        given relative to the lowest binpack score the session sees, and nodes at that lowest score are left out.
        On a cluster where most nodes look alike the answer is a handful of entries instead of one per offered
        node, which both sides would otherwise encode and decode on kube-scheduler's sequential path."""
        names = args.names()
        namespace, name, _ = self._meta(args.pod)
        planned = self.plan.node_for(f"{namespace}/{name}")
        table, base = self._score_table(args.pod)
        # Hashing thousands of freshly decoded names costs more than a few scans of the list.
        offered: Container[str] = names if len(table) + (planned is not None) <= 2 else set(names)
        if len(table) <= len(names):
            entries = [e for e in table.values() if e["Host"] in offered]
        else:
            entries = [table[n] for n in names if n in table]
        if planned is not None and planned in offered:
            entries = [e for e in entries if e["Host"] != planned]
            entries.append({"Host": planned, "Score": MAX_SCORE - base})
        return entries

    def _score_table(self, pod: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], int]:
        """Answer entries by node: binpack scores (0–9) of every node the latest session knows, minus the lowest
        of them (`base`), only the nodes above it. Kept per session outcome and request, since kube-scheduler asks
        for one pod after another and pods of one workload ask for the same resources; the entries are shared
        between answers and never changed."""
        latest = self.loop.latest
        request = self._request(pod)
        if latest is None or request is None or not latest.node_index:
            return {}, 0
        if self._tables_for is not latest:
            before = self._tables_for
            if before is None or not _same_room(before, self._room(before), latest):
                self._tables = {}
                self._names = row_names(latest)
            self._tables_for = latest
        key = request.tobytes()
        cached = self._tables.get(key)
        if cached is None:
            rows = np.arange(len(self._names), dtype=np.intp)
            scores = np.clip(np.floor(self._binpack(request, rows) * MAX_SCORE), 0, MAX_SCORE - 1).astype(np.int64)
            base = int(scores.min())
            above = np.flatnonzero(scores > base)
            names = self._names
            cached = ({names[r]: {"Host": names[r], "Score": int(scores[r]) - base} for r in above.tolist()}, base)
            if len(self._tables) >= 64:
                self._tables.clear()
            self._tables[key] = cached
        return cached

    # ---- bind -----------------------------------------------------------------------------------------------
    async def bind(self, args: ExtenderBindingArgs) -> ExtenderBindingResult:
        """Bind (or park, for a gang) only what kube-scheduler could have chosen (`bindcheck`); anything else is
        answered with the reason and counted, and never reaches the API server."""
        namespace, name, node, uid = args.pod_namespace, args.pod_name, args.node, args.pod_uid
        key = f"{namespace}/{name}"
        refusal = names_refusal(namespace, name, uid, node)
        if refusal is not None:
            return self._refused(refusal)
        if not self.state.synced:
            return self._refused(Refusal("not-synced", NOT_SYNCED), key)
        pod = self.state.pod(namespace, name)
        if pod is None:  # the watch may trail kube-scheduler's by a moment
            try:
                pod = await self.client.get(PODS, name, namespace)
            except NotFound:
                return self._refused(Refusal("pod-not-found", f"pod {key} not found"))
            except REQUEST_ERRORS as exc:
                return self._refused(Refusal("pod-lookup-failed", f"looking up pod {key}: {_failure(exc)}"))
        if meta(pod).get("uid") == uid and (current := (pod.get("spec") or {}).get("nodeName")):
            if current == node:  # idempotent: kube-scheduler may repeat a bind whose answer it missed
                return self._bound("")
            return self._refused(Refusal("already-bound", f"pod {key} is already bound to {current}"))
        spec = pod.get("spec") or {}
        refusal = pod_refusal(pod, key, uid, self.scheduler_names) or node_refusal(
            self.state.snapshot.nodes.get(node), node, spec, key
        )
        _, _, gang = self._meta(pod)
        podgroup = self.state.snapshot.podgroups.get(gang) if gang else None
        # The plan's quorum: minMember, or fewer when the session counted BestEffort members as ready.
        planned = self.plan.gangs.get(gang) if gang else None
        quorum = planned.min_member if planned is not None else podgroup.min_member if podgroup else 0
        in_gang = gang is not None and podgroup is not None and quorum > 1
        if refusal is None and in_gang:
            refusal = self._plan_refusal(pod, key, node, str(gang))
        if refusal is None:
            record = self.state.snapshot.nodes[node]
            refusal = room_refusal(self.state, record, spec, key, self._pending_on(node))
        devices: PodDevices | None = None
        if refusal is None:
            # The plan may be fresher than this view (the session follows the cluster on its own watch: a pod it saw
            # go may still hold its card here): a refusal here is one a later plan answers (`_refused`).
            devices, refusal = self._bind_cards(pod, key, node)
        if refusal is not None:
            return self._refused(refusal, key)
        if devices is not None:  # the cards are taken from now on: by the bind on its way, then by the pod
            self.book.reserve(key, node, devices)
        if not in_gang:
            self._inflight[key] = node
            try:
                error = await self.bind_now(namespace, name, node, uid, pod)
            finally:
                self._inflight.pop(key, None)
        else:
            assert gang is not None
            error = await self.permit.park(gang, quorum, self.state.bound_members(gang), namespace, name, uid, node)
        if error and devices is not None:
            self.book.release(key)
        return self._bound(error)

    def _bind_cards(self, pod: Mapping[str, Any], key: str, node: str) -> tuple[PodDevices | None, Refusal | None]:
        """The vGPU cards the pod is bound with (None: it asks for none): those planned for it on this node while
        they still fit as they are, else the cards that fit it there now; a node without them is refused."""
        book = self._cards()
        ask = book.ask(pod) if book.active else None
        if ask is None:
            return None, None
        planned = self.plan.devices_for(key) if self.plan.node_for(key) == node else None
        if planned is not None and not book.check(node, planned, exclude=key):
            return planned, None
        fit = book.fit(ask, node, exclude=key)
        if isinstance(fit, Fit):
            return book.devices(fit, node), None
        why = NO_CARDS if fit is None else fit.reason
        return None, Refusal("no-card-room", f"node {node} has no vGPU card for pod {key}: {why}")

    def _plan_refusal(self, pod: Mapping[str, Any], key: str, node: str, gang: str) -> Refusal | None:
        """A gang member binds to the node its gang's plan admits, or to one it fits in the room the latest
        session left (what filter's re-plan accepts; the plan then follows it)."""
        planned = self.plan.node_for(key)
        if planned == node:
            return None
        if planned is not None and self._replan(pod, key, planned, [node]) == node:
            return None
        where = f"planned for {planned}" if planned else "not planned by a session"
        return Refusal("not-planned", f"gang {gang}: pod {key} is {where}; node {node} is not admitted")

    def _pending_on(self, node: str) -> list[str]:
        """Pods headed for `node` that the cache does not show there yet: parked gang members, binds in flight."""
        return [*self.permit.parked_on(node), *(k for k, n in self._inflight.items() if n == node)]

    def _refused(self, refusal: Refusal, key: str = "") -> ExtenderBindingResult:
        """Answer a refused bind. kube-scheduler sets the pod aside until it changes (or its 60 s flush): for a
        refusal a later plan answers (`REPLANNED`: a takeover's bind before its caches synced, a plan dropped or
        moved meanwhile, a vGPU card taken) the pod `key` waits, as one filter turned away, and is touched once its
        gang is planned."""
        self.metrics.bind_refusals.labels(refusal.reason).inc()
        if key and refusal.reason in REPLANNED:
            self.loop.waiting.add(key)
            self.loop.poke()
        return self._bound(f"lapilli: bind refused: {refusal.message}")

    def _bound(self, error: str) -> ExtenderBindingResult:
        self.metrics.binds.labels("error" if error else "bound").inc()
        return ExtenderBindingResult(Error=error)

    async def bind_now(self, namespace: str, name: str, node: str, uid: str,
                       pod: Mapping[str, Any] | None = None) -> str:
        """POST the Binding; "" on success (also when the pod already sits on `node`), else one line saying why
        (the API server's refusal, a dropped connection, a timeout, a failed credential plugin). A pod given vGPU
        cards carries them on the Binding as annotations (Volcano's DeviceReservation): the API server merges
        them into the pod together with the node, so the pod is never bound without them. `pod`: the pod as the
        caller read it (default: the cache's)."""
        held = self.book.reserved.get(f"{namespace}/{name}")
        annotations: dict[str, str] = {}
        if held is not None and held.node == node:
            annotations.update(assignment_annotations(node, held.devices, int(time.time())))
        # A pod of ours that names no PodGroup yet names it with its node: the PodGroup controller leaves the
        # annotation to the Binding rather than write it separately (`controller.podgroups`).
        pod = pod if pod is not None else self.state.pod(namespace, name)
        if pod is not None and not annotations_of(pod).get(GROUP_NAME_ANNOTATION):
            group = group_of(pod, self.scheduler_names)
            if group:
                annotations[GROUP_NAME_ANNOTATION] = group
        try:
            await self.client.bind(namespace, name, node, uid=uid or None, annotations=annotations or None)
        except Conflict:
            try:
                pod = await self.client.get(PODS, name, namespace)
            except REQUEST_ERRORS as exc:
                return f"binding {namespace}/{name}: {_failure(exc)}"
            current = (pod.get("spec") or {}).get("nodeName")
            return "" if current == node else f"pod {namespace}/{name} is already bound to {current}"
        except REQUEST_ERRORS as exc:
            return f"binding {namespace}/{name} to {node}: {_failure(exc)}"
        cards = held.devices if held is not None and held.node == node else None
        self.plan.bound(f"{namespace}/{name}", node, time.monotonic(), cards)
        return ""

    # ---- preempt --------------------------------------------------------------------------------------------
    def preempt(self, args: ExtenderPreemptionArgs) -> ExtenderPreemptionResult:
        _, _, gang = self._meta(args.pod)
        if gang is not None:
            # Gangs are preempted for by the session (preempt/reclaim actions), whole, never pod by pod.
            return ExtenderPreemptionResult()
        queue = str(annotations_of(args.pod).get(QUEUE_NAME_ANNOTATION) or DEFAULT_QUEUE)  # its PodGroup's, soon
        kept: dict[str, MetaVictims] = {}
        for node, uids in args.victims().items():
            if uids and self._acceptable(uids, queue):
                kept[node] = MetaVictims(Pods=[MetaPod(UID=u) for u in uids])
        return ExtenderPreemptionResult(NodeNameToMetaVictims=kept)

    def _acceptable(self, uids: list[str], preemptor_queue: str) -> bool:
        snap = self.state.snapshot
        latest = self.loop.latest
        lost: dict[str, int] = {}
        for uid in uids:
            key = self.state.pod_keys_by_uid.get(uid)
            pod = snap.pods.get(key or "")
            if pod is None:
                return False
            if not pod.preemptable:
                return False
            if pod.group:
                gang = f"{pod.namespace}/{pod.group}"
                lost[gang] = lost.get(gang, 0) + 1
                podgroup = snap.podgroups.get(gang)
                if podgroup is not None and podgroup.queue != preemptor_queue:
                    record = snap.queues.get(podgroup.queue)
                    if record is not None and not record.reclaimable:
                        return False  # across queues this is reclaim, which Volcano never does from such a queue
                if podgroup is not None and latest is not None:
                    queue = latest.queues.get(podgroup.queue)
                    if queue is not None and queue.deserved is not None and queue.share <= 1.0:
                        return False  # its queue is within what it deserves
        for gang, count in lost.items():
            podgroup = snap.podgroups.get(gang)
            if podgroup is not None and self.state.bound_members(gang) - count < podgroup.min_member:
                return False
        return True
