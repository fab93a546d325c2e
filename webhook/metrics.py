"""Prometheus metrics of the admission face, registered on a registry the assembly owns."""

from __future__ import annotations

from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram

# Admission must answer well inside the apiserver's timeout; the interesting range is sub-millisecond to 100 ms.
BUCKETS: Final = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.reviews = Counter(
            "lapilli_webhook_admission_total",
            "AdmissionReviews answered, by webhook, operation and verdict.",
            ["webhook", "operation", "allowed"],
            registry=registry,
        )
        self.latency = Histogram(
            "lapilli_webhook_admission_duration_seconds",
            "Time to read, judge and answer one AdmissionReview.",
            ["webhook"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.bad_requests = Counter(
            "lapilli_webhook_bad_requests_total",
            "Requests refused before admission (not an AdmissionReview v1), by path and HTTP status.",
            ["path", "status"],
            registry=registry,
        )
        self.rule_failures = Counter(
            "lapilli_webhook_rule_failures_total",
            "Admission rules that raised (a bug): the request was denied with an explanation instead of a 5xx.",
            ["webhook"],
            registry=registry,
        )
