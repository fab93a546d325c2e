"""The Job the job rules read: `lapilli.api.Job` decoded shape-only (`Job.from_admission`), the one Job model of
the webhook, the controllers and the CLI.

Volcano's webhook decodes the object into its Go types first and denies it with the decode error when a field has
the wrong type (`schema.DecodeJob`); the value rules then speak in their own words. `decode_job` does the same: a
wrongly typed field raises `DecodeError` naming its path (`spec.tasks[0].replicas: expected an integer, got
"three"`), and values the rules judge (negative counts, bad names, unknown policy events) are kept for them.
The pod template stays a dict (`webhook.jobs.podschema` checks it), but for the two fields Volcano's own job
code decodes: the template's `spec` object and its `hostNetwork`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from lapilli.api import Job, LifecyclePolicy, TaskSpec
from webhook.decode import DecodeError, boolean, from_validation_error, mapping


def decode_job(obj: Mapping[str, Any] | None) -> Job:
    """Decode the admitted Job; raises `DecodeError` naming the first malformed field."""
    if obj is None:
        raise DecodeError("object", "a Job", None)
    try:
        job = Job.from_admission(obj)
    except ValidationError as exc:
        raise from_validation_error(Job, exc) from None
    for i, task in enumerate(job.spec.tasks):
        path = f"spec.tasks[{i}].template"
        boolean(mapping(task.template, "spec", path), "hostNetwork", f"{path}.spec")
    return job


__all__ = ["DecodeError", "Job", "LifecyclePolicy", "TaskSpec", "decode_job"]
