"""Reading the cluster: list-then-watch reflectors and the cluster state they keep (kernel)."""

from lapilli.cluster.reflector import Backoff, Event, EventHandler, Reflector, diff, object_key, watch_timeout
from lapilli.cluster.workqueue import WorkQueue

__all__ = ["Backoff", "Event", "EventHandler", "Reflector", "WorkQueue", "diff", "object_key", "watch_timeout"]
