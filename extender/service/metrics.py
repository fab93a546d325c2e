"""The extender's Prometheus metrics, registered on the service's registry."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from extender.engine.results import QueueResult, resource_amounts
from lapilli.resources.vector import Dims

_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, 60)
_STARTUP_BUCKETS: Final = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)


class TimeToRunning:
    """`lapilli_podgroup_time_to_running_seconds{queue}`: observed where the leader learns a PodGroup became Running
    (its session wrote phase Running over a stored phase that was not), once per PodGroup (by uid: a write repeated
    before the watch shows the first one is not counted again)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histogram = Histogram(
            "lapilli_podgroup_time_to_running_seconds", "Time from PodGroup creation to its phase Running.",
            ["queue"], buckets=_STARTUP_BUCKETS, registry=registry)
        self._counted: dict[str, str] = {}  # ns/name -> uid already observed

    def observe(self, key: str, uid: str, queue: str, creation: float, wall_now: float) -> None:
        if self._counted.get(key) == uid:
            return
        self._counted[key] = uid
        self.histogram.labels(queue).observe(max(wall_now - creation, 0.0))

    def retain(self, keys: Collection[str]) -> None:
        """Forget PodGroups that are gone (a new one under the same name is a new job)."""
        self._counted = {k: uid for k, uid in self._counted.items() if k in keys}


JOB_PHASES: Final = frozenset({"pending", "inqueue", "running"})


def queue_job_counts(phases: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """(queue, PodGroup phase) pairs -> how many PodGroups per queue and lower-case phase, for the phases
    `lapilli_queue_jobs` shows (no phase yet counts as pending)."""
    counts: dict[tuple[str, str], int] = {}
    for queue, phase in phases:
        phase = (phase or "Pending").lower()
        if phase in JOB_PHASES:
            counts[(queue, phase)] = counts.get((queue, phase), 0) + 1
    return counts


class QueueJobs:
    """`lapilli_queue_jobs{queue,phase}`: set from each of the leader's sessions (the phases its status writes
    give), and cleared when the replica stops leading, so only the leader exports it."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.gauge = Gauge("lapilli_queue_jobs", "PodGroups per queue and phase (pending = not admitted, inqueue = "
                           "admitted and waiting, running), as the leader's last session left them.",
                           ["queue", "phase"], registry=registry)
        self._labels: set[tuple[str, str]] = set()

    def set(self, counts: Mapping[tuple[str, str], int]) -> None:
        for labels in self._labels - set(counts):
            self.gauge.labels(*labels).set(0)  # a queue's last job of a phase left it: 0, not a stale count
        for labels, count in counts.items():
            self.gauge.labels(*labels).set(count)
        self._labels |= set(counts)

    def clear(self) -> None:
        self.gauge.clear()
        self._labels.clear()


class ExtenderMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        parked: Callable[[], int],
        restarts: Callable[[], Mapping[str, int]],
        releasing: Callable[[], int] = lambda: 0,
    ) -> None:
        """`parked`, `releasing`: pods parked at bind and gang releases under way, as the permit cache counts."""
        self.verb_seconds = Histogram(
            "lapilli_extender_request_duration_seconds", "Extender verb latency.", ["verb"],
            buckets=_LATENCY_BUCKETS, registry=registry,
        )
        self.verb_failures = Counter(
            "lapilli_extender_verb_failures", "Verbs that failed unexpectedly (answered with `Error`, traceback "
            "logged).", ["verb"], registry=registry,
        )
        self.binds = Counter("lapilli_extender_binds_total", "Bind outcomes.", ["result"], registry=registry)
        self.bind_refusals = Counter(
            "lapilli_extender_bind_refusals", "Binds refused before reaching the API server, by reason.", ["reason"],
            registry=registry,
        )
        self.replans = Counter(
            "lapilli_extender_replans_total", "Planned pods kube-scheduler did not offer their planned node, by what "
            "filter or bind did: moved to another offered node the pod fits (resources, then pod affinity, spread "
            "and ports against the pods bound or planned), or failed (the gang's plan is dropped).", ["result"],
            registry=registry,
        )
        self.picks = Counter(
            "lapilli_extender_picks_total", "Volcano pods filter passed without a plan (no PodGroup yet, an admitted "
            "gang of one), by its answer: picked (the one node the conf's node order puts first) or passed (every "
            "offered node: the order needs more than the nodes' numbers, or no node has the room).", ["result"],
            registry=registry,
        )
        self.permit_timeouts = Counter(
            "lapilli_gang_permit_timeouts_total", "Gangs whose permit timed out at bind.", registry=registry
        )
        self.evictions = Counter("lapilli_evictions_total", "Pods evicted by preempt or reclaim.", registry=registry)
        # Read with lapilli_evictions_total as the release pair below: a gang evicted whole is partly bound between
        # the Eviction calls of its pods.
        self.evictions_in_flight = Gauge("lapilli_evictions_in_flight", "Evictions a session asked for whose "
                                         "Eviction calls are not all answered.", registry=registry)
        self.evictions_by = Counter(
            "lapilli_evictions_by_action_total", "Pods evicted, by the action that chose them (preempt, reclaim) and "
            "the queue they were taken from.", ["action", "queue"], registry=registry)
        self.session_seconds = Histogram(
            "lapilli_session_duration_seconds", "Scheduling session duration.", buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.ignored = Gauge(
            "lapilli_extender_ignored_objects", "Objects the scheduler leaves out because it cannot read them (each "
            "has a Warning Event InvalidObject saying why), by kind, as the leader last counted.", ["kind"],
            registry=registry,
        )
        self.session_failures = Counter(
            "lapilli_session_failures_total", "Scheduling sessions that failed.", registry=registry
        )
        self.conf_reload_errors = Counter(
            "lapilli_scheduler_conf_reload_errors_total",
            "Scheduler configuration reloads refused (the last good configuration keeps running).", registry=registry,
        )
        self.conf_stale = Gauge(
            "lapilli_scheduler_conf_stale",
            "1 while the scheduler configuration file on disk is not the one in use (it failed to load).",
            registry=registry,
        )
        parked_gauge = Gauge("lapilli_gang_permit_waiting_pods", "Pods parked at bind.", registry=registry)
        parked_gauge.set_function(lambda: float(parked()))
        # Read together, the two say whether a release overlapped a moment: one was under way at its start, or the
        # count grew by its end (a gang is partly bound between the Bindings of its release).
        self.gang_releases = Counter("lapilli_gang_releases", "Gangs released at bind (their Bindings sent "
                                     "together).", registry=registry)
        releasing_gauge = Gauge("lapilli_gang_releases_in_flight", "Gang releases whose Bindings are not all "
                                "answered.", registry=registry)
        releasing_gauge.set_function(lambda: float(releasing()))
        self._restarts = Gauge(
            "lapilli_reflector_restarts", "Watch restarts per resource.", ["resource"], registry=registry
        )
        self._restarts_source = restarts
        self.queue_deserved = Gauge(
            "lapilli_queue_deserved", "Queue deserved share.", ["queue", "resource"], registry=registry
        )
        self.queue_allocated = Gauge(
            "lapilli_queue_allocated", "Queue allocation.", ["queue", "resource"], registry=registry
        )
        self.time_to_running = TimeToRunning(registry)
        self.queue_jobs = QueueJobs(registry)

    def observe_queue(self, name: str, dims: Dims, queue: QueueResult) -> None:
        if queue.deserved is not None:
            for resource, amount in resource_amounts(dims, queue.deserved).items():
                self.queue_deserved.labels(name, resource).set(amount)
        for resource, amount in resource_amounts(dims, queue.allocated).items():
            self.queue_allocated.labels(name, resource).set(amount)
        for resource, count in self._restarts_source().items():
            self._restarts.labels(resource).set(count)
