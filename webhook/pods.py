"""Admission of Pods — Volcano's `pkg/webhooks/admission/pods/{mutate,validate}` plus job-plugin env.

* `/pods/mutate` (CREATE): a pod of a Volcano Job (annotations `volcano.sh/job-name`, `volcano.sh/task-spec`,
  `volcano.sh/task-index`) gets what its Job's plugins give it (`lapilli.jobplugins.apply_plugins`) when it
  lacks it — pods rendered by Lapilli's controller already have it and get an empty patch. A pod whose Job is
  unknown gets no plugin change. Before that, a pod of a resource group of `--admission-conf` gets the group's
  nodeSelector, affinity, tolerations and schedulerName (`webhook.resourcegroups`). (Volcano's
  queue-allocation-gate mutation is not implemented: it needs scheduling gates, absent before 1.26.)
* `/pods/validate` (CREATE), for pods whose `schedulerName` is one of ours: the job-disruption-budget
  annotations are a positive integer or a percentage strictly between 0% and 100%, and not both at once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import jsonpatch

from lapilli.api.constants import (
    JDB_MAX_UNAVAILABLE_KEY,
    JDB_MIN_AVAILABLE_KEY,
    JOB_NAME_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
)
from lapilli.jobplugins import apply_plugins
from lapilli.meta import annotations_of, namespace_of
from webhook.context import AdmissionContext
from webhook.outcome import Outcome, allow, deny
from webhook.review import AdmissionRequest

JDB_KEYS: Final = (JDB_MIN_AVAILABLE_KEY, JDB_MAX_UNAVAILABLE_KEY)
_GO_INT: Final = re.compile(r"^[+-]?\d+$")


def mutate_pod(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/pods/mutate`: the pod's resource group first (Volcano's mutatepod, its patch as Volcano writes it), then
    its Job's plugins."""
    pod = request.object
    if request.operation != "CREATE" or pod is None:
        return allow()
    group = ctx.resource_groups().group_of(pod, namespace_of(pod) or request.namespace)
    grouping = group.patch(pod) if group is not None else []
    annotations = annotations_of(pod)
    job_name, task, index = (annotations.get(k) for k in (JOB_NAME_KEY, TASK_SPEC_KEY, TASK_INDEX_KEY))
    if not (isinstance(job_name, str) and isinstance(task, str) and isinstance(index, str) and index.isdigit()):
        return allow(grouping)
    job = ctx.jobs.get(request.namespace, job_name)
    if job is None:
        return allow(grouping)
    mutated = apply_plugins(job, task, int(index), jsonpatch.apply_patch(pod, grouping))
    return allow(jsonpatch.make_patch(pod, mutated).patch)


def _budget_error(key: str, value: str) -> str:
    """Volcano's `validateIntPercentageStr` (an `intstr.Parse` then a range check)."""
    if _GO_INT.match(value) and abs(int(value)) < 2**31:
        return "" if int(value) > 0 else f'invalid value <"{value}"> for {key}, it must be a positive integer'
    digits = value.replace("%", "")
    if not _GO_INT.match(digits):
        return f'invalid value strconv.Atoi: parsing "{digits}": invalid syntax for {key}'
    if not 0 < int(digits) < 100:
        return f'invalid value <"{value}"> for {key}, it must be a valid percentage which between 1% ~ 99%'
    return ""


def validate_pod(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/pods/validate`."""
    pod = request.object
    if request.operation != "CREATE" or pod is None:
        return allow()
    spec = pod.get("spec")
    scheduler = spec.get("schedulerName") if isinstance(spec, Mapping) else None
    if scheduler not in ctx.settings.scheduler_names:
        return allow()
    annotations = annotations_of(pod)
    present = [k for k in JDB_KEYS if k in annotations]
    for key in present:
        if error := _budget_error(key, str(annotations[key])):
            return deny(error)
    if len(present) > 1:
        return deny(f"not allow configure multiple annotations <[{' '.join(JDB_KEYS)}]> at same time")
    return allow()
