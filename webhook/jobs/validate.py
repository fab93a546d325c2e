"""Job validation on CREATE — Volcano's `validateJobCreate` (`pkg/webhooks/admission/jobs/validate/admit_job.go`)
together with the checks Volcano moved into ValidatingAdmissionPolicies (`jobs-validating.yaml`).

Volcano's fragments are concatenated (each usually ` <text>;`) and trimmed, so one denial lists every problem.
The first group of checks returns at once, as in Volcano. The status is 403 Forbidden when only the queue
refused the job (missing, not Open, root, not a leaf), else 400 BadRequest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from lapilli.api import VolumeSpec
from lapilli.jobplugins import KNOWN_PLUGINS, make_pod_name, parse_flags
from webhook.context import ROOT_QUEUE, AdmissionContext
from webhook.jobs.model import Job, TaskSpec
from webhook.jobs.policies import policies_message
from webhook.jobs.template import task_template_message
from webhook.jobs.topology import TOPOLOGY_CONFLICT, topology_conflict
from webhook.names import dns1123_label, dns1123_subdomain, go_list, qualified_name
from webhook.outcome import Outcome, allow, deny
from webhook.queueview import children, is_open, not_found, state_of

CLAIM_CONFLICT: Final = (
    "conflict: If you want to use an existing PVC, just specify VolumeClaimName."
    "If you want to create a new PVC, you do not need to specify VolumeClaimName"
)


def early_error(job: Job) -> str:
    """Checks after which Volcano stops at once."""
    spec = job.spec
    if spec.min_available < 0:
        return "job 'minAvailable' must be >= 0."
    if spec.max_retry < 0:
        return "'maxRetry' cannot be less than zero."
    if spec.ttl_seconds_after_finished is not None and spec.ttl_seconds_after_finished < 0:
        return "'ttlSecondsAfterFinished' cannot be less than zero."
    if not spec.tasks:
        return "No task specified in job spec"
    if "mpi" in spec.plugins:
        master = parse_flags(spec.plugins["mpi"], {"master": "master", "worker": "worker", "port": 22}).text("master")
        if all(t.name != master for t in spec.tasks):
            return "The specified mpi master task was not found"
    return ""


def partition_errors(task: TaskSpec, job_name: str) -> Iterator[str]:
    """`validatePartitionPolicy`: the first broken partition rule, then the partition's networkTopology."""
    p = task.partition_policy
    if p is None:
        return
    where = f"in task: {task.name}, job: {job_name};"
    if p.total_partitions <= 0:
        yield f" 'TotalPartitions' must be greater than 0 {where}"
    elif p.partition_size <= 0:
        yield f" 'PartitionSize' must be greater than 0 {where}"
    elif task.replicas != p.total_partitions * p.partition_size:
        yield f" 'Replicas' are not equal to TotalPartitions*PartitionSize {where}"
    elif (task.min_available is not None and p.min_partitions > 0
          and p.min_partitions * p.partition_size != task.min_available):
        yield f" 'MinAvailable' is not equal to MinPartitions*PartitionSize {where}"
    if topology_conflict(p.network_topology):
        yield f" {TOPOLOGY_CONFLICT};"


def task_fragments(job: Job) -> Iterator[str]:
    names: set[str] = set()
    for index, task in enumerate(job.spec.tasks):
        where = f"in task: {task.name}, job: {job.name};"
        if task.replicas < 0:
            yield f" 'replicas' < 0 {where}"
        if task.min_available is not None and task.min_available < 0:
            yield f" 'minAvailable' < 0 {where}"
        elif task.min_available is not None and task.min_available > task.replicas:
            yield f" 'minAvailable' is greater than 'replicas' {where}"
        if errors := dns1123_label(task.name):
            yield f" {go_list(errors)};"
        if task.name in names:
            yield f" duplicated task name {task.name};"
            break  # Volcano stops checking tasks here
        names.add(task.name)
        if message := policies_message(task.policies, "spec.tasks.policies"):
            yield message
        pod_name = make_pod_name(job.name, task.name, index)
        if errors := qualified_name(pod_name):
            yield f"create pod with name {pod_name} validate failed {go_list(errors)};"
        yield task_template_message(task, index)
        yield from partition_errors(task, job.name)


def volume_error(volumes: list[VolumeSpec]) -> str:
    """Volcano's `validateIO`: only the first problem is reported."""
    mount_paths: set[str] = set()
    for volume in volumes:
        if not volume.mount_path:
            return " mountPath is required;"
        if volume.mount_path in mount_paths:
            return f" duplicated mountPath: {volume.mount_path};"
        has_claim = volume.volume_claim is not None
        if not has_claim and not volume.volume_claim_name:
            return " either VolumeClaim or VolumeClaimName must be specified;"
        if volume.volume_claim_name:
            if has_claim:
                return CLAIM_CONFLICT
            if errors := dns1123_subdomain(volume.volume_claim_name):
                return f"invalid VolumeClaimName {volume.volume_claim_name} : {go_list(errors)}"
        mount_paths.add(volume.mount_path)
    return ""


def queue_fragment(job: Job, ctx: AdmissionContext) -> str:
    name = job.spec.queue
    queue = ctx.queues.get(name)
    if queue is None:
        return f" unable to find job queue: {not_found(name)};"
    if not is_open(queue):
        return f" can only submit job to queue with state `Open`, queue `{name}` status is `{state_of(queue)}`;"
    if name == ROOT_QUEUE:
        return " can not submit job to root queue;"
    if kids := children(ctx.queues, name):
        return f" can only submit job to leaf queue, queue `{name}` has {len(kids)} child queues;"
    return ""


def is_dag(job: Job) -> bool:
    """Kahn's algorithm over `dependsOn` edges; a dependency on an unknown task never resolves (as in Volcano)."""
    tasks = job.spec.tasks
    indegree = {t.name: len(t.depends_on.name) if t.depends_on else 0 for t in tasks}
    dependents: dict[str, list[str]] = {}
    for task in tasks:
        for dep in task.depends_on.name if task.depends_on else ():
            dependents.setdefault(dep, []).append(task.name)
    ready = [name for name, degree in indegree.items() if degree == 0]
    done = 0
    while ready:
        done += 1
        for nxt in dependents.get(ready.pop(), []):
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    return done == len(tasks)


def spec_fragments(job: Job) -> Iterator[str]:
    spec = job.spec
    if topology_conflict(spec.network_topology):
        yield f" {TOPOLOGY_CONFLICT};"
    yield from task_fragments(job)
    if errors := qualified_name(job.name):
        yield f"create job with name {job.name} validate failed {go_list(errors)}"
    if sum(t.replicas for t in spec.tasks) < spec.min_available:
        yield " job 'minAvailable' should not be greater than total replicas in tasks;"
    yield policies_message(spec.policies, "spec.policies")
    for name in sorted(spec.plugins):
        if name not in KNOWN_PLUGINS:
            yield f" unable to find job plugin: {name};"
    yield volume_error(spec.volumes)


def validate_job_create(job: Job, ctx: AdmissionContext) -> Outcome:
    if message := early_error(job):
        return deny(message)
    spec_message = "".join(spec_fragments(job))
    queue_message = queue_fragment(job, ctx)
    dag_message = (
        ""
        if all(t.depends_on is None for t in job.spec.tasks) or is_dag(job)
        else (" job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);")
    )
    message = (spec_message + queue_message + dag_message).strip()
    if not message:
        return allow()
    return deny(message, forbidden=not (spec_message or dag_message))
