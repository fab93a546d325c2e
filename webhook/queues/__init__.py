"""Admission of Volcano Queues: `/queues/mutate` (CREATE defaults) and `/queues/validate` (CREATE, UPDATE, DELETE)."""

from __future__ import annotations

from webhook.context import AdmissionContext
from webhook.outcome import Outcome, allow, deny
from webhook.queues.hierarchy import hierarchy_error
from webhook.queues.mutate import mutate_queue
from webhook.queues.validate import basic_error, delete_error
from webhook.review import AdmissionRequest


def validate_queue(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/queues/validate`."""
    if request.operation == "DELETE":
        message, forbidden = delete_error(request.name, ctx, request.old_object)
        return deny(message, forbidden=forbidden) if message else allow()
    if request.operation not in ("CREATE", "UPDATE"):
        return allow()
    if request.object is None:
        return deny("object: expected a Queue, got null")
    if message := basic_error(request.object, ctx):
        return deny(message)
    old = request.old_object if request.operation == "UPDATE" else None
    message, forbidden = hierarchy_error(request.object, old, ctx)
    return deny(message, forbidden=forbidden) if message else allow()


__all__ = ["mutate_queue", "validate_queue"]
