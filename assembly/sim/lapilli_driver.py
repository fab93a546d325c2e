"""Lapilli's scheduler in the simulation: each cycle is one engine session over a fresh snapshot.

The snapshot holds what the API server would: the workload's Nodes, Queues (plus the `default` queue Volcano's
scheduler creates when missing) and PriorityClasses, and for each submitted, unfinished job its PodGroup (named
after the job, phase carried over from the previous session) and its pods (placed ones `Running` on their node).
Binds place pods at once, evictions send them back to pending; pipelined pods wait for a later cycle.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from assembly.sim.state import Cluster, JobState, PodState
from assembly.sim.workload import to_resource_list
from extender.engine.conf import DEFAULT_CONF, SchedulerConf
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import GROUP_NAME_ANNOTATION, TASK_SPEC_KEY, build_snapshot
from lapilli.api.constants import DEFAULT_QUEUE
from lapilli.meta import name_of
from lapilli.times import rfc3339_micro

# Volcano's default configuration with GPU-aware binpack added to the second tier.
SIM_CONF: Final = DEFAULT_CONF.rstrip() + "\n  - name: binpack\n"
EPOCH: Final = datetime(2024, 1, 1, tzinfo=UTC)


def sim_conf(text: str | None = None) -> SchedulerConf:
    """The simulator's scheduler conf: `text` (Volcano's format) or the default conf plus binpack."""
    return parse_scheduler_conf(text if text is not None else SIM_CONF)


def _timestamp(seconds: float) -> str:
    return rfc3339_micro(EPOCH.timestamp() + seconds)


def _default_queue() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": DEFAULT_QUEUE},
        "spec": {"weight": 1, "reclaimable": True},
        "status": {"state": "Open"},
    }


def podgroup_document(state: JobState) -> dict[str, Any]:
    job = state.job
    spec: dict[str, Any] = {
        "minMember": job.min_available,
        "minTaskMember": dict(job.min_task_member),
        "minResources": to_resource_list(job.min_resources),
        "queue": job.queue,
    }
    if job.priority_class:
        spec["priorityClassName"] = job.priority_class
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "uid": job.key,
            "creationTimestamp": _timestamp(state.submitted or 0.0),
            "annotations": dict(job.annotations),  # Volcano's job controller copies them (task-topology reads)
        },
        "spec": spec,
        "status": {"phase": state.pg_phase},
    }


def pod_document(pod: PodState, group: str) -> dict[str, Any]:
    spec = dict(pod.spec)
    if pod.node is not None:
        spec["nodeName"] = pod.node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.key,
            "creationTimestamp": _timestamp(pod.created),
            "labels": {TASK_SPEC_KEY: pod.task},
            "annotations": {GROUP_NAME_ANNOTATION: group, TASK_SPEC_KEY: pod.task},
        },
        "spec": spec,
        "status": {"phase": "Running" if pod.node is not None else "Pending"},
    }


class LapilliScheduler:
    """One engine session per cycle; a cycle reports whether it changed anything."""

    name: Final = "lapilli"

    def __init__(self, conf: SchedulerConf | None = None) -> None:
        self.conf = conf if conf is not None else sim_conf()

    def documents(self, cluster: Cluster) -> list[dict[str, Any]]:
        work = cluster.workload
        docs: list[dict[str, Any]] = [*work.nodes, *work.priority_classes, *work.queues]
        if all(name_of(q) != DEFAULT_QUEUE for q in work.queues):
            docs.append(_default_queue())
        for state in cluster.jobs.values():
            if state.active:
                docs.append(podgroup_document(state))
        for pod in cluster.pods.values():
            docs.append(pod_document(pod, cluster.jobs[pod.job].job.name))
        return docs

    def cycle(self, cluster: Cluster, now: float) -> bool:
        result = run_session(build_snapshot(self.documents(cluster)), self.conf, now)
        changed = False
        for key, node in sorted(result.binds.items()):
            pod = cluster.pods.get(key)
            if pod is not None and pod.node != node:
                pod.node = node
                changed = True
        for key in sorted(result.evictions):
            pod = cluster.pods.get(key)
            if pod is not None and pod.node is not None:
                pod.node = None
                changed = True
        for key, status in result.podgroups.items():
            state = cluster.jobs.get(key)
            if state is not None and state.pg_phase != status.phase:
                state.pg_phase = status.phase
                changed = True
        return changed
