"""The extender's Prometheus metrics, registered on the service's registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from extender.engine.results import QueueResult, resource_amounts
from lapilli.resources.vector import Dims

_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, 60)


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
        self.permit_timeouts = Counter(
            "lapilli_gang_permit_timeouts_total", "Gangs whose permit timed out at bind.", registry=registry
        )
        self.evictions = Counter("lapilli_evictions_total", "Pods evicted by preempt or reclaim.", registry=registry)
        self.evictions_by = Counter(
            "lapilli_evictions_by_action_total", "Pods evicted, by the action that chose them (preempt, reclaim) and "
            "the queue they were taken from.", ["action", "queue"], registry=registry)
        self.session_seconds = Histogram(
            "lapilli_session_duration_seconds", "Scheduling session duration.", buckets=_LATENCY_BUCKETS,
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

    def observe_queue(self, name: str, dims: Dims, queue: QueueResult) -> None:
        if queue.deserved is not None:
            for resource, amount in resource_amounts(dims, queue.deserved).items():
                self.queue_deserved.labels(name, resource).set(amount)
        for resource, amount in resource_amounts(dims, queue.allocated).items():
            self.queue_allocated.labels(name, resource).set(amount)
        for resource, count in self._restarts_source().items():
            self._restarts.labels(resource).set(count)
