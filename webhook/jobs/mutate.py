"""Job defaulting — Volcano's `pkg/webhooks/admission/jobs/mutate/mutate_job.go` (CREATE only).

In Volcano's order: `spec.queue` := `default`; `spec.schedulerName` := the first scheduler name; `spec.maxRetry`
:= 3 when 0; per task: name := `default<i>`, `dnsPolicy` := `ClusterFirstWithHostNet` for hostNetwork pods,
`minAvailable` := `minPartitions * partitionSize` (partitioned) or `replicas`, `maxRetry` := 3 when 0; then
`spec.minAvailable` := Σ task minAvailable when 0 (so an explicit 0 cannot be expressed, as in Volcano); then
the implied plugins (pytorch/mpi/tensorflow/ray ⇒ svc, mpi ⇒ ssh).

Volcano replaces the whole `/spec/tasks` array; Lapilli emits one op per defaulted field so the patch never
rewrites what the user wrote. A warning is returned wherever a default replaced a value the user gave (an
explicit 0) or added a plugin the user did not list, and for plugin arguments that do not parse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lapilli.api.constants import DEFAULT_MAX_RETRY
from lapilli.jobplugins import implied_plugins, plugin_errors
from webhook.context import DEFAULT_QUEUE, AdmissionContext
from webhook.decode import DecodeError
from webhook.jobs.model import Job, TaskSpec, decode_job
from webhook.outcome import Outcome, PatchOp, allow, deny, escape
from webhook.review import AdmissionRequest


def task_min_available(task: TaskSpec) -> int:
    """The default of a task's `minAvailable`."""
    partition = task.partition_policy
    if partition is not None and partition.min_partitions > 0:
        return partition.min_partitions * partition.partition_size
    return task.replicas


def _task_ops(job: Job, raw_tasks: list[Any], warnings: list[str]) -> tuple[list[PatchOp], int]:
    ops: list[PatchOp] = []
    total = 0
    for i, task in enumerate(job.spec.tasks):
        base = f"/spec/tasks/{i}"
        if not task.name:
            ops.append({"op": "add", "path": f"{base}/name", "value": f"default{i}"})
        pod_spec = task.template.get("spec") or {}
        if pod_spec.get("hostNetwork") and not pod_spec.get("dnsPolicy"):
            ops.append({"op": "add", "path": f"{base}/template/spec/dnsPolicy", "value": "ClusterFirstWithHostNet"})
        min_available = task.min_available
        if min_available is None:
            min_available = task_min_available(task)
            ops.append({"op": "add", "path": f"{base}/minAvailable", "value": min_available})
        if not task.max_retry:
            ops.append({"op": "add", "path": f"{base}/maxRetry", "value": DEFAULT_MAX_RETRY})
            if "maxRetry" in raw_tasks[i]:
                warnings.append(f"spec.tasks[{i}].maxRetry 0 replaced by the default {DEFAULT_MAX_RETRY}")
        total += min_available
    return ops, total


def _plugin_ops(job: Job, obj: Mapping[str, Any], warnings: list[str]) -> list[PatchOp]:
    plugins = job.spec.plugins
    if not plugins:
        return []
    added = implied_plugins(plugins)
    for name in added:
        by = "mpi" if name == "ssh" else next(p for p in ("pytorch", "mpi", "tensorflow", "ray") if p in plugins)
        warnings.append(f"plugin {name} added: the {by} plugin needs it")
    for name, error in plugin_errors(obj).items():
        warnings.append(f"plugin {name}: {error}; later arguments ignored")
    return [{"op": "add", "path": f"/spec/plugins/{escape(name)}", "value": args} for name, args in added.items()]


def job_patch(obj: Mapping[str, Any], job: Job, scheduler_name: str) -> tuple[list[PatchOp], list[str]]:
    """The JSON-patch ops and warnings that default `job` (decoded from `obj`)."""
    spec = obj.get("spec")
    ops: list[PatchOp] = [] if isinstance(spec, Mapping) else [{"op": "add", "path": "/spec", "value": {}}]
    spec = spec if isinstance(spec, Mapping) else {}
    warnings: list[str] = []
    # The model's defaults are the CRD's, which the API server has applied before this webhook runs; what counts
    # here is what the object says.
    if not spec.get("queue"):
        ops.append({"op": "add", "path": "/spec/queue", "value": DEFAULT_QUEUE})
    if not job.spec.scheduler_name:
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": scheduler_name})
    if not spec.get("maxRetry"):
        ops.append({"op": "add", "path": "/spec/maxRetry", "value": DEFAULT_MAX_RETRY})
        if "maxRetry" in spec:
            warnings.append(f"spec.maxRetry 0 replaced by the default {DEFAULT_MAX_RETRY}")
    task_ops, total = _task_ops(job, list(spec.get("tasks") or []), warnings)
    ops += task_ops
    if not job.spec.min_available:
        ops.append({"op": "add", "path": "/spec/minAvailable", "value": total})
        if "minAvailable" in spec and total:
            warnings.append(f"spec.minAvailable 0 replaced by {total}, the sum of the tasks' minAvailable")
    ops += _plugin_ops(job, obj, warnings)
    return ops, warnings


def mutate_job(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/jobs/mutate`."""
    if request.operation != "CREATE":
        return allow()
    try:
        job = decode_job(request.object)
    except DecodeError as exc:
        return deny(str(exc))
    ops, warnings = job_patch(request.object or {}, job, ctx.settings.scheduler_names[0])
    return allow(ops, warnings)
