"""What every controller shares: the write client, the stores, the event recorder, settings and metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.cache import Store
from controller.metrics import ControllerMetrics
from controller.settings import ControllerSettings
from lapilli.api.constants import JOB_NAME_KEY
from lapilli.kube import KubeClient
from lapilli.kube.events import EventRecorder
from lapilli.meta import annotations_of, name_of, namespace_of


def job_index(pod: Mapping[str, Any]) -> str | None:
    """Pods of a Volcano Job by `namespace/job` (the `volcano.sh/job-name` annotation)."""
    name = annotations_of(pod).get(JOB_NAME_KEY)
    return f"{namespace_of(pod)}/{name}" if name else None


def queue_index(podgroup: Mapping[str, Any]) -> str | None:
    """PodGroups by the queue they are in (the CRD defaults it to `default`)."""
    return str((podgroup.get("spec") or {}).get("queue") or "default")


@dataclass
class Context:
    client: KubeClient
    settings: ControllerSettings
    recorder: EventRecorder
    metrics: ControllerMetrics
    jobs: Store = field(default_factory=Store)
    pods: Store = field(default_factory=lambda: Store({"job": job_index}))
    podgroups: Store = field(default_factory=lambda: Store({"queue": queue_index}))
    queues: Store = field(default_factory=Store)
    priority_classes: Store = field(default_factory=Store)
    nodes: Store = field(default_factory=Store)
    hypernodes: Store = field(default_factory=Store)
    pod_gate: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(64))

    def priorities(self) -> dict[str, int]:
        """PriorityClass name -> value."""
        return {
            name_of(pc): int(pc.get("value") or 0) for pc in self.priority_classes.values()
        }
