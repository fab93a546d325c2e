"""How big one Job may be: Lapilli's own admission limit (Volcano has none).

A Job declaring `replicas: 2147483647` is valid to Volcano's rules, yet every component that reads it (the Job
controller creating pods, the job plugins writing host lists, the scheduler's gang sizes) then works in
proportion to a number nobody meant. The webhook refuses a Job above `--max-job-replicas` pods or
`--max-job-tasks` tasks on CREATE, and an UPDATE that grows a Job past them (a Job admitted before the limit was
lowered may still shrink), naming the limit and the flag that sets it.
"""

from __future__ import annotations

from lapilli.api import Job
from webhook.context import AdmissionSettings


def _replicas(job: Job) -> int:
    return sum(max(t.replicas, 0) for t in job.spec.tasks)


def size_error(job: Job, settings: AdmissionSettings, old: Job | None = None) -> str:
    """Why `job` (updating `old`, if given) is too big for this cluster, or ""."""
    tasks = len(job.spec.tasks)
    if tasks > settings.max_job_tasks and (old is None or tasks > len(old.spec.tasks)):
        return (f"spec.tasks: {tasks} tasks exceed the limit of {settings.max_job_tasks} per Job "
                "(lapilli serve --max-job-tasks)")
    total = _replicas(job)
    if total > settings.max_job_replicas and (old is None or total > _replicas(old)):
        return (f"spec.tasks[*].replicas: {total} pods in total exceed the limit of {settings.max_job_replicas} "
                "per Job (lapilli serve --max-job-replicas)")
    return ""
