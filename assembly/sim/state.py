"""The simulated cluster: nodes, the pods the job controller created, and each job's lifecycle.

A pod is either pending (no node) or placed; a placed pod counts as running at once (no image pulls, no kubelet
delay). A job starts when `minAvailable` of its pods are placed and finishes `duration` later, freeing its pods.
A started job that drops below `minAvailable` (eviction) is interrupted: it releases all its pods (as a Volcano Job
with a `PodEvicted → RestartJob` policy does) and starts again from scratch once its gang is placed again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from assembly.sim.topology import spans, workload_tree
from assembly.sim.workload import SimJob, SimPodSpec, Workload, gpus
from extender.engine.snapshot import NodeRecord, build_snapshot
from lapilli.devices.assign import PodDevices
from lapilli.resources.units import Units
from lapilli.topology import HyperNodeTree


@dataclass(slots=True)
class PodState:
    key: str
    namespace: str
    name: str
    job: str
    task: str
    spec: Mapping[str, Any]
    request: Units
    created: float
    # kube-scheduler's queue order: creation time, then the controller's creation round (pods of jobs submitted
    # at the same instant are created in parallel, one round per pod position), then the job.
    order: tuple[float, int, str]
    node: str | None = None
    devices: PodDevices | None = None  # the vGPU cards the scheduler gave it on `node` (deviceshare)

    @classmethod
    def create(cls, job: SimJob, spec: SimPodSpec, now: float) -> PodState:
        return cls(
            key=f"{job.namespace}/{spec.name}",
            namespace=job.namespace,
            name=spec.name,
            job=job.key,
            task=spec.task,
            spec=spec.spec,
            request=spec.request,
            created=now,
            order=(now, spec.position, job.key),
        )


@dataclass(slots=True)
class JobState:
    job: SimJob
    submitted: float | None = None
    started: float | None = None
    finished: float | None = None
    finish_at: float | None = None
    pg_phase: str = "Pending"
    interruptions: int = 0
    span: int | None = None  # tiers its pods spanned beyond the lowest when it last started (HyperNodes only)

    @property
    def active(self) -> bool:
        """Submitted and not finished: its PodGroup and pods exist."""
        return self.submitted is not None and self.finished is None


@dataclass(slots=True)
class Cluster:
    workload: Workload
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    pods: dict[str, PodState] = field(default_factory=dict)
    jobs: dict[str, JobState] = field(default_factory=dict)
    tree: HyperNodeTree | None = None  # the workload's HyperNodes over its nodes (assembly.sim.topology)

    @classmethod
    def create(cls, workload: Workload) -> Cluster:
        nodes = dict(sorted(build_snapshot(workload.nodes).nodes.items()))
        jobs = {j.key: JobState(j) for j in workload.jobs}
        return cls(workload, nodes, {}, jobs, workload_tree(workload, nodes))

    @property
    def total_gpus(self) -> float:
        return sum(gpus(n.allocatable) for n in self.nodes.values() if n.ready and not n.unschedulable)

    def submit(self, key: str, now: float) -> None:
        state = self.jobs[key]
        state.submitted = now
        for spec in state.job.pods:
            pod = PodState.create(state.job, spec, now)
            self.pods[pod.key] = pod

    def finish(self, key: str, now: float) -> bool:
        """Finish a running job whose finish time has come; False for a stale event (job interrupted)."""
        state = self.jobs[key]
        if state.finish_at != now or state.finished is not None:
            return False
        state.finished = now
        state.finish_at = None
        for pod in list(self.job_pods(key)):
            del self.pods[pod.key]
        return True

    def job_pods(self, key: str) -> Iterator[PodState]:
        return (p for p in self.pods.values() if p.job == key)

    def placed(self, key: str) -> int:
        return sum(1 for p in self.job_pods(key) if p.node is not None)

    def update_jobs(self, now: float) -> list[tuple[float, str]]:
        """Start jobs whose gang is placed, interrupt started jobs below minAvailable; new finish events."""
        events: list[tuple[float, str]] = []
        placed_by_job: dict[str, int] = {}
        for pod in self.pods.values():
            if pod.node is not None:
                placed_by_job[pod.job] = placed_by_job.get(pod.job, 0) + 1
        for key, state in self.jobs.items():
            if not state.active:
                continue
            placed = placed_by_job.get(key, 0)
            if state.started is None and placed >= state.job.min_available:
                state.started = now
                nodes = {p.name: p.node for p in self.job_pods(key)}
                if self.tree is not None:
                    state.span = spans(self.tree, (n for n in nodes.values() if n))
                state.finish_at = now + state.job.run_time(nodes, state.span or 0)
                events.append((state.finish_at, key))
            elif state.started is not None and placed < state.job.min_available:
                state.started = None
                state.finish_at = None
                state.interruptions += 1
                # The job restarts whole (a Job's PodEvicted → RestartJob policy): its other pods are released
                # too, instead of holding their resources while the gang waits to be whole again.
                for pod in self.job_pods(key):
                    pod.node, pod.devices = None, None
        return events

    def gpu_used_by_queue(self) -> dict[str, float]:
        """GPUs held by started jobs, by the jobs' queue."""
        out: dict[str, float] = {}
        for pod in self.pods.values():
            job = self.jobs[pod.job]
            if pod.node is not None and job.started is not None:
                out[job.job.queue] = out.get(job.job.queue, 0.0) + gpus(pod.request)
        return out

    def gpu_usage(self) -> tuple[float, float]:
        """GPUs of placed pods: (held by started jobs, held idle by jobs that have not started)."""
        used = idle = 0.0
        for pod in self.pods.values():
            if pod.node is None:
                continue
            if self.jobs[pod.job].started is not None:
                used += gpus(pod.request)
            else:
                idle += gpus(pod.request)
        return used, idle
