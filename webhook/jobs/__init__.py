"""Admission of Volcano Jobs: `/jobs/mutate` (defaults) and `/jobs/validate` (CREATE and UPDATE rules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.context import AdmissionContext
from webhook.decode import DecodeError
from webhook.jobs.limits import size_error
from webhook.jobs.model import decode_job
from webhook.jobs.mutate import mutate_job
from webhook.jobs.podtemplate import pod_template_error
from webhook.jobs.update import update_error
from webhook.jobs.validate import validate_job_create
from webhook.outcome import Outcome, allow, deny
from webhook.review import AdmissionRequest


def _spec(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (obj or {}).get("spec")
    return spec if isinstance(spec, Mapping) else {}


def validate_job(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/jobs/validate`."""
    if request.operation not in ("CREATE", "UPDATE"):
        return allow()
    try:
        job = decode_job(request.object)
        if request.operation == "CREATE":
            # Before any rule walks the tasks or their templates.
            if message := size_error(job, ctx.settings) or pod_template_error(job):
                return deny(message)
            return validate_job_create(job, ctx)
        old = decode_job(request.old_object)
    except DecodeError as exc:
        return deny(str(exc))
    message = size_error(job, ctx.settings, old) or update_error(old, job, _spec(request.old_object),
                                                                 _spec(request.object))
    return deny(message) if message else allow()


__all__ = ["mutate_job", "validate_job"]
