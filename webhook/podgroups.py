"""Admission of PodGroups — Volcano's `pkg/webhooks/admission/podgroups/{mutate,validate}`.

* `/podgroups/mutate` (CREATE): a PodGroup in the `default` queue moves to the queue its Namespace names in the
  `scheduling.volcano.sh/queue-name` annotation.
* `/podgroups/validate` (CREATE): the queue must exist and be Open (403 otherwise); `highestTierAllowed` (set
  at all, even to 0) and `highestTierName` are exclusive in `networkTopology` and in the `subGroupPolicy`
  entries (the first conflicting one is named). The queue and topology messages are joined by `; `.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lapilli.api.constants import QUEUE_NAME_ANNOTATION as NAMESPACE_QUEUE_KEY
from lapilli.meta import annotations_of
from webhook.context import DEFAULT_QUEUE, AdmissionContext
from webhook.decode import DecodeError, element, items, mapping, string
from webhook.jobs.topology import TOPOLOGY_CONFLICT, topology_conflict
from webhook.outcome import Outcome, allow, deny
from webhook.queueview import is_open, not_found, state_of
from webhook.review import AdmissionRequest


def mutate_podgroup(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/podgroups/mutate`."""
    if request.operation != "CREATE" or request.object is None:
        return allow()
    try:
        spec = mapping(request.object, "spec", "")
        queue = string(spec, "queue", "spec")
    except DecodeError as exc:
        return deny(str(exc))
    if queue not in ("", DEFAULT_QUEUE):
        return allow()
    namespace = ctx.namespaces.get(request.namespace)
    target = annotations_of(namespace).get(NAMESPACE_QUEUE_KEY)
    if not isinstance(target, str) or not target or target == queue:
        return allow()
    ops: list[dict[str, Any]] = [] if "spec" in request.object else [{"op": "add", "path": "/spec", "value": {}}]
    ops.append({"op": "add", "path": "/spec/queue", "value": target})
    note = f"spec.queue set to {target} by namespace {request.namespace}'s {NAMESPACE_QUEUE_KEY} annotation"
    return allow(ops, [note])


def _topology_message(spec: Mapping[str, Any]) -> str:
    """Volcano's `validateNetworkTopology` for PodGroups: sentences joined by a space, the first conflicting
    subGroupPolicy only."""
    errors = []
    if topology_conflict(spec.get("networkTopology")):
        errors.append(f"{TOPOLOGY_CONFLICT}.")
    for i, raw in enumerate(items(spec, "subGroupPolicy", "spec")):
        policy = element(raw, f"spec.subGroupPolicy[{i}]")
        if topology_conflict(policy.get("networkTopology")):
            errors.append(f"in subGroupPolicy '{policy.get('name', '')}': {TOPOLOGY_CONFLICT}.")
            break
    return " ".join(errors)


def validate_podgroup(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/podgroups/validate`."""
    if request.operation != "CREATE":
        return allow()
    try:
        spec = mapping(request.object or {}, "spec", "")
        queue_name = string(spec, "queue", "spec")
        topology_message = _topology_message(spec)
    except DecodeError as exc:
        return deny(str(exc))
    queue_error = ""
    if queue_name:
        queue = ctx.queues.get(queue_name)
        if queue is None:
            queue_error = f"unable to find queue: {not_found(queue_name)}"
        elif not is_open(queue):
            queue_error = (
                f"can only submit PodGroup to queue with state `Open`, queue `{queue_name}` status is "
                f"`{state_of(queue)}`."
            )
    message = "; ".join(m for m in (queue_error, topology_message) if m)
    return deny(message, forbidden=not topology_message) if message else allow()
