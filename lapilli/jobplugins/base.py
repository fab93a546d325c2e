"""What a job plugin is: arguments parsed once, then two pure hooks.

Mirrors Volcano's `PluginInterface` (`pkg/controllers/job/plugins/interface`): `OnPodCreate` becomes `on_pod`
(edit one pod of the Job in place — callers hand in a copy) and the objects `OnJobAdd`/`OnJobUpdate` create
become `resources` (the desired Service/ConfigMap/Secret/NetworkPolicy manifests; creating, updating and
deleting them is the controller's job). No I/O happens here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from lapilli.jobplugins.naming import JobShape


@dataclass(frozen=True, slots=True)
class PodContext:
    """Which replica a pod is: its Job, task name, index within the task, and its own name (= hostname)."""

    job: JobShape
    task: str
    index: int
    pod_name: str


class JobPlugin(Protocol):
    """One job plugin, built from its `spec.plugins[name]` arguments."""

    @property
    def name(self) -> str: ...

    @property
    def error(self) -> str:
        """The argument-parse error ("" if none); defaults were kept for the flags after it, as in Go."""
        ...

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        """Add what this plugin gives a pod; must not add anything the pod already has."""
        ...

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        """Objects this plugin needs next to the Job's pods (empty for most plugins)."""
        ...
