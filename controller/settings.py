"""Settings of the controllers (one frozen object, validated by the service assembly before start)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lapilli.api.common import DNS_SUBDOMAIN_PATTERN
from lapilli.api.constants import DEFAULT_SCHEDULER_NAME
from lapilli.settings import flag


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Volcano's vc-controller-manager flags that matter here, plus Lapilli's concurrency knobs."""

    enabled: bool = flag("--enable-controllers/--disable-controllers", True)
    """Run the Job, Queue, PodGroup and garbage-collection controllers (Volcano's vc-controller-manager) in this
    process."""
    job_workers: int = flag("--controller-workers", 8)
    """Volcano Jobs synced concurrently (one Job is never synced by two workers at once)."""
    pod_concurrency: int = flag("--controller-pod-concurrency", 64)
    """Pod creations and deletions in flight at once, across all Jobs."""
    max_requeue: int = flag("--max-requeue-num", 15)
    """Failed attempts at one Job request before the Job is terminated (-1: retry forever)."""
    scheduler_names: tuple[str, ...] = flag("--scheduler-name", (DEFAULT_SCHEDULER_NAME,))
    """Plain pods with one of these `schedulerName`s get a PodGroup of their own."""
    inherit_owner_annotations: bool = flag("--inherit-owner-annotations/--no-inherit-owner-annotations", True)
    """PodGroups of plain pods copy the pod owner's `volcano.sh/*` annotations."""
    gang_heal_timeout_s: float = flag("--gang-heal-timeout", 0.0)
    """Seconds a Volcano Job whose gang fell below minAvailable while keeping members (one deleted, failed, evicted by
    anyone but the scheduler, or on a node that is gone) has to regain them: a PodEvicted/PodFailed policy without
    a timeout of its own waits this long (dropped once the member made in its place runs), then acts; with no such
    policy the Job gets a GangDegraded warning Event then. 0: policies act at once, as Volcano's, and a Job with no
    such policy is warned at once."""
    sync_timeout_s: float = 60.0
    """How long start-up waits for the caches before the workers start anyway (not ready until synced)."""
    leader_elect: bool = flag("--leader-elect/--no-leader-elect", True)
    """Run the controllers only while holding a coordination.k8s.io Lease, so one replica of many acts."""
    lease_namespace: str = flag("--lease-namespace", "lapilli-system")
    """Namespace of the Lease (the service's namespace, where the extender's Lease is too)."""
    lease_name: str = flag("--controllers-lease-name", "lapilli-controllers")
    """Name of the controllers' Lease (Volcano's controller manager calls its own `vc-controller-manager`)."""
    hypernode_discovery_configmap: str = flag("--hypernode-discovery-configmap", "")
    """NAMESPACE/NAME of a ConfigMap in Volcano's controller format (key `volcano-controller.conf`) whose
    `networkTopologyDiscovery` entry `source: label`, when enabled, makes HyperNodes from node labels (Volcano
    reads `volcano-system/volcano-controller-configmap`). Empty: no discovery. The install and `lapilli dev up`
    name `lapilli-system/volcano-controller-configmap`, which does not exist until you create it."""

    def discovery_configmap(self) -> tuple[str, str] | None:
        """(namespace, name) of the discovery ConfigMap, or None when discovery is off."""
        namespace, _, name = self.hypernode_discovery_configmap.partition("/")
        return (namespace, name) if name else None

    def problems(self) -> list[str]:
        out: list[str] = []
        if self.job_workers < 1:
            out.append(f"--controller-workers {self.job_workers} must be >= 1")
        if self.pod_concurrency < 1:
            out.append(f"--controller-pod-concurrency {self.pod_concurrency} must be >= 1")
        if self.gang_heal_timeout_s < 0:
            out.append(f"--gang-heal-timeout {self.gang_heal_timeout_s:g} must be >= 0 seconds (0: act at once)")
        if self.max_requeue < -1:
            out.append(f"--max-requeue-num {self.max_requeue} must be >= 0 (or -1: retry forever)")
        if not self.scheduler_names:
            out.append("--scheduler-name must be given at least once")
        if self.hypernode_discovery_configmap and not _namespaced_name(self.hypernode_discovery_configmap):
            out.append(f"--hypernode-discovery-configmap {self.hypernode_discovery_configmap!r} must be "
                       "NAMESPACE/NAME (e.g. lapilli-system/volcano-controller-configmap)")
        return out


def _namespaced_name(text: str) -> bool:
    namespace, slash, name = text.partition("/")
    return bool(slash) and all(len(part) <= 253 and re.fullmatch(DNS_SUBDOMAIN_PATTERN, part) for part in
                               (namespace, name))
