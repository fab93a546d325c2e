"""Reading the cluster: list-then-watch reflectors and the cluster state they keep, and the Lease-based leader
election that decides which replica acts on it (kernel)."""

from lapilli.cluster.leader import LeaderGauge, LeaseElector, default_identity
from lapilli.cluster.reflector import Event, EventHandler, Reflector, diff, watch_timeout
from lapilli.cluster.shared import Shared
from lapilli.cluster.workqueue import RateLimiter, WorkQueue, run_worker

__all__ = [
    "Event",
    "EventHandler",
    "LeaderGauge",
    "LeaseElector",
    "RateLimiter",
    "Reflector",
    "Shared",
    "WorkQueue",
    "default_identity",
    "diff",
    "run_worker",
    "watch_timeout",
]
