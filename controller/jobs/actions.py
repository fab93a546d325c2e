"""Carrying out one step of the state machine against the API server: sync, kill the Job, kill a target.

Mirrors `syncJob`, `killJob` and `killTarget` in `job_controller_actions.go` (reference §3.2, §3.5); what to
do is decided by the pure modules (`state`, `sync`, `podgroup`, `pods`, `status`), this module only does it.
Every answer of the API server goes back into the stores, so the next step sees its own effects. Pods are
created and deleted concurrently behind one semaphore shared by all Jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from controller.context import Context
from controller.jobs.podgroup import desired_podgroup, podgroup_name, spec_patch
from controller.jobs.pods import render_pod
from controller.jobs.requests import job_owner
from controller.jobs.resources import PluginResources, PvcMissing
from controller.jobs.state import NONE, SOFT, Counts, Op, Step, next_phase
from controller.jobs.status import build_status, merge_patch, transition
from controller.jobs.sync import SyncPlan, Target, plan_kill, plan_sync
from lapilli.api import Job, JobEvent, JobPhase, TaskSpec
from lapilli.api.constants import CONTROLLER_OUT_OF_SYNC_KEY, JOB_FORWARDING_KEY
from lapilli.kube import AlreadyExists, ApiError, Conflict, NotFound
from lapilli.kube.resources import PODGROUPS, PODS, VC_JOBS
from lapilli.meta import Obj, name_of, namespace_of, uid_of
from lapilli.times import go_duration, parse_rfc3339, rfc3339

log = logging.getLogger(__name__)

CREATE_CHUNK: Final = 256
"""Pods rendered and sent per round of one sync (the pod gate bounds how many are in flight)."""


class ActionError(RuntimeError):
    """The step did not complete; the request is retried with back-off."""


class StaleJob(RuntimeError):
    """Our view of the Job was older than the server's: re-read it and try again at once."""


class JobActions:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.plugins = PluginResources(ctx.client)
        self._pending_notes: dict[str, str] = {}  # job key -> last PodGroupPending message recorded

    def forget(self, job_key: str) -> None:
        """The Job is gone: drop what was remembered about it."""
        self._pending_notes.pop(job_key, None)

    def job_pods(self, job: Job) -> list[Obj]:
        """The Job's pods: indexed under its name and owned by this very incarnation (UID)."""
        pods = self.ctx.pods.by_index("job", f"{job.namespace}/{job.name}")
        return [p for p in pods if (job_owner(p) or {}).get("uid") == job.metadata.uid]

    async def execute(self, job_doc: Obj, step: Step, target: Target | None = None) -> None:
        job = Job.from_wire(job_doc)
        if job.metadata.deletion_timestamp:
            return  # being deleted: the cleanup of its children is under way
        if step.op == Op.SYNC:
            await self._sync(job_doc, job, step)
        elif step.op == Op.KILL_JOB:
            await self._kill(job_doc, job, step)
        else:
            await self._kill_target(job_doc, job, step, target or Target())

    # -- sync ----------------------------------------------------------------------------------------------

    async def _sync(self, job_doc: Obj, job: Job, step: Step) -> None:
        queue = self.ctx.queues.get(job.spec.queue)
        if queue is None:
            raise ActionError(f"queue {job.spec.queue} of Job {job.namespace}/{job.name} not found")
        forwarding = bool((queue.get("spec") or {}).get("extendClusters"))
        if forwarding and job.metadata.annotations.get(JOB_FORWARDING_KEY) != "true":
            job_doc = await self._write_job(job, {"metadata": {"annotations": {JOB_FORWARDING_KEY: "true"}}})
            job = Job.from_wire(job_doc)
        controlled = dict(job.status.controlled_resources)
        if job.status.state.phase in (None, JobPhase.PENDING):
            async with self._failure(job_doc, JobEvent.PLUGIN_ERROR, "Execute plugin when job add failed"):
                await self.plugins.on_add(job, job_doc, controlled)
            async with self._failure(job_doc, JobEvent.PVC_ERROR, "Failed to create PVC"):
                if await self.plugins.ensure_pvcs(job, job_doc, controlled):
                    return  # the claim names just written to the spec bring the Job back through its watch
        else:
            async with self._failure(job_doc, JobEvent.PLUGIN_ERROR, "Execute plugin when job update failed"):
                await self.plugins.on_update(job_doc, controlled)
        async with self._failure(job_doc, JobEvent.POD_GROUP_ERROR, "Failed to create PodGroup"):
            podgroup = await self._ensure_podgroup(job, job_doc)
        phase = str((podgroup.get("status") or {}).get("phase") or "")
        self._podgroup_events(job_doc, podgroup)
        plan = plan_sync(job, self.job_pods(job), deleting=self.ctx.pods.deleting,
                         admitted=phase not in ("", "Pending"))
        await self._create_pods(job_doc, job, plan, forwarding)
        await self._delete_pods(job_doc, plan.delete)
        await self._write_status(job_doc, job, step, plan.counts, version=job.status.version,
                                 retry_count=job.status.retry_count, controlled=controlled)

    @contextlib.asynccontextmanager
    async def _failure(self, job_doc: Obj, reason: JobEvent, what: str) -> AsyncIterator[None]:
        """Record a Warning Event on the Job when the block fails (the error still propagates)."""
        try:
            yield
        except (ApiError, PvcMissing, OSError, TimeoutError) as exc:
            self.ctx.recorder.record(job_doc, "Warning", reason.value, f"{what}, err: {exc}")
            raise

    async def _ensure_podgroup(self, job: Job, job_doc: Obj) -> Obj:
        desired = desired_podgroup(job, job_doc, self.ctx.priorities())
        key = f"{job.namespace}/{podgroup_name(job.name, job.metadata.uid or '')}"
        current = self.ctx.podgroups.get(key)
        if current is None:
            try:
                current = await self.ctx.client.create(PODGROUPS, desired)
                self.ctx.metrics.podgroups_created.labels("job").inc()
            except AlreadyExists:
                current = await self.ctx.client.get(PODGROUPS, name_of(desired), job.namespace)
            self.ctx.podgroups.wrote(current)
            return current
        if (patch := spec_patch(current, desired["spec"])) is not None:
            current = await self.ctx.client.patch(PODGROUPS, name_of(desired), patch, job.namespace)
            self.ctx.podgroups.wrote(current)
        return current

    def _podgroup_events(self, job_doc: Obj, podgroup: Obj) -> None:
        """Volcano's `recordPodGroupEvent`: the scheduler's reason a gang waits, on the Job itself."""
        namespace, name = namespace_of(job_doc), name_of(job_doc)
        for cond in (podgroup.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Unschedulable" and cond.get("status") == "True":
                message = f"PodGroup {namespace}:{name} unschedule,reason: {cond.get('message', '')}"
                key = f"{namespace}/{name}"
                if self._pending_notes.get(key) != message:
                    self._pending_notes[key] = message
                    self.ctx.recorder.record(job_doc, "Warning", JobEvent.POD_GROUP_PENDING.value, message)

    async def _create_pods(self, job_doc: Obj, job: Job, plan: SyncPlan, forwarding: bool) -> None:
        """Create the plan's missing pods, `CREATE_CHUNK` at a time, so what is in flight or rendered at once
        stays bounded whatever the Job declares; the first chunk with failures ends the sync (retried)."""

        async def one(task: TaskSpec, index: int) -> str | None:
            async with self.ctx.pod_gate:
                pod = render_pod(job, job_doc, task, index, forwarding=forwarding)
                try:
                    self.ctx.pods.wrote(await self.ctx.client.create(PODS, pod))
                    self.ctx.metrics.pods_created.inc()
                except AlreadyExists:
                    pass  # its watch event is on the way; the next sync counts it
                except ApiError as exc:
                    return f"failed to create pod {name_of(pod)}, err: {exc.message}"
            return None

        creations = plan.creations()
        created = 0
        while chunk := list(itertools.islice(creations, CREATE_CHUNK)):
            errors = [e for e in await asyncio.gather(*(one(t, i) for t, i in chunk)) if e]
            if errors:
                self.ctx.recorder.record(job_doc, "Warning", "FailedCreate", f"Error creating pods: {errors}")
                raise ActionError(f"failed to create {len(errors)} pods of {len(chunk)}")
            created += len(chunk)
        if created:
            self.ctx.recorder.record(job_doc, "Normal", "SuccessfulCreate", f"Created {created} pod(s)")

    async def _delete_pods(self, job_doc: Obj, pods: Sequence[Obj]) -> None:
        if not pods:
            return

        async def one(pod: Obj) -> str | None:
            name, namespace = name_of(pod), namespace_of(pod)
            async with self.ctx.pod_gate:
                try:
                    # Marked first: the deletion then reads as OutOfSync, never as an eviction to act on.
                    mark = {"metadata": {"annotations": {CONTROLLER_OUT_OF_SYNC_KEY: "true"}}}
                    await self.ctx.client.patch(PODS, name, mark, namespace)
                    await self.ctx.client.delete(PODS, name, namespace, uid=uid_of(pod) or None)
                    self.ctx.metrics.pods_deleted.inc()
                except (NotFound, Conflict):
                    pass  # already gone, or replaced by a namesake we must not touch
                except ApiError as exc:
                    return f"failed to delete pod {name}, err: {exc.message}"
                self.ctx.pods.deleted(pod, linger=True)
            return None

        errors = [e for e in await asyncio.gather(*(one(p) for p in pods)) if e]
        if errors:
            self.ctx.recorder.record(job_doc, "Warning", "FailedDelete", f"Error deleting pods: {errors}")
            raise ActionError(f"failed to delete {len(errors)} pods of {len(pods)}")
        self.ctx.recorder.record(job_doc, "Normal", "SuccessfulDelete", f"Deleted {len(pods)} pod(s)")

    # -- kill ----------------------------------------------------------------------------------------------

    async def _kill(self, job_doc: Obj, job: Job, step: Step) -> None:
        last_retry = job.status.retry_count >= job.spec.max_retry - 1
        retain = SOFT if last_retry else step.retain
        doomed, counts = plan_kill(self.job_pods(job), retain=retain, deleting=self.ctx.pods.deleting)
        await self._delete_pods(job_doc, doomed)
        controlled = dict(job.status.controlled_resources)
        await self.plugins.on_delete(job, controlled)
        retry = job.status.retry_count + (1 if step.retry else 0)
        await self._write_status(job_doc, job, step, counts, version=job.status.version + 1, retry_count=retry,
                                 controlled=controlled, killed=True)
        await self._delete_podgroup(job)

    async def _kill_target(self, job_doc: Obj, job: Job, step: Step, target: Target) -> None:
        doomed, counts = plan_kill(self.job_pods(job), retain=NONE, deleting=self.ctx.pods.deleting, target=target)
        await self._delete_pods(job_doc, doomed)
        retry = job.status.retry_count + (1 if step.retry else 0)
        await self._write_status(job_doc, job, step, counts, version=job.status.version, retry_count=retry,
                                 controlled=dict(job.status.controlled_resources))

    async def _delete_podgroup(self, job: Job) -> None:
        name = podgroup_name(job.name, job.metadata.uid or "")
        current = self.ctx.podgroups.get(f"{job.namespace}/{name}")
        try:
            answer = await self.ctx.client.delete(PODGROUPS, name, job.namespace)
        except NotFound:
            answer = None
        for gone in (current, answer):
            if gone is not None and uid_of(gone):
                self.ctx.podgroups.deleted(gone, linger=False)

    # -- status ----------------------------------------------------------------------------------------------

    async def _write_status(
        self, job_doc: Obj, job: Job, step: Step, counts: Counts, *, version: int, retry_count: int,
        controlled: dict[str, str], killed: bool = False,
    ) -> None:
        now = time.time()
        old = dict(job_doc.get("status") or {})
        new = build_status(old, counts, min_available=job.spec.min_available, version=version,
                           retry_count=retry_count, controlled=controlled)
        current = job.status.state.phase
        if current is None:
            transition(new, JobPhase.PENDING, rfc3339(now))
        target = next_phase(step, job, counts, retry_count, job.spec.min_available)
        if target is not None and target != (current or JobPhase.PENDING):
            transition(new, target, rfc3339(now))
        if (target is not None and target != current) or killed:
            created = job.metadata.creation_timestamp
            if created:
                new["runningDuration"] = go_duration(now - parse_rfc3339(created))
        patch = merge_patch(old, new)
        if patch:
            await self._write_job(job, {"status": patch}, subresource="status")

    async def _write_job(self, job: Job, patch: dict[str, Any], subresource: str | None = None) -> Obj:
        """Patch the Job with our resourceVersion as precondition: a stale view must not overwrite news."""
        body = {**patch, "metadata": {**patch.get("metadata", {}), "resourceVersion": job.metadata.resource_version}}
        try:
            written = await self.ctx.client.patch(VC_JOBS, job.name, body, job.namespace, subresource=subresource)
        except Conflict:
            fresh = await self.ctx.client.get(VC_JOBS, job.name, job.namespace)
            self.ctx.jobs.wrote(fresh)
            raise StaleJob(f"Job {job.namespace}/{job.name} changed meanwhile") from None
        self.ctx.jobs.wrote(written)
        return written
