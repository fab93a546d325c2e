"""conformance: never evict critical system pods (Volcano's `plugins/conformance`)."""

from __future__ import annotations

from typing import Final

from extender.engine.interface import SessionView
from extender.engine.model import Task
from extender.engine.registry import register_plain_plugin

CRITICAL_CLASSES: Final = frozenset({"system-cluster-critical", "system-node-critical"})


def evictable(_actor: Task, candidates: list[Task]) -> list[Task]:
    return [t for t in candidates if t.priority_class not in CRITICAL_CLASSES and t.namespace != "kube-system"]


class ConformancePlugin:
    name = "conformance"

    def on_session_open(self, ssn: SessionView) -> None:
        ssn.add_preemptable(evictable)
        ssn.add_reclaimable(evictable)
        ssn.add_evictable(lambda _ctx, candidates: evictable(_ctx.actor, candidates))

    def on_session_close(self, ssn: SessionView) -> None:
        return None


register_plain_plugin("conformance", ConformancePlugin)
