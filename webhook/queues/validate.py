"""Queue validation — Volcano's `pkg/webhooks/admission/queues/validate/validate_queue.go`.

CREATE/UPDATE: quantities valid and ≥ 0; guarantee ≤ deserved ≤ capability per resource; `status.state` Open or
Closed; hierarchy annotations consistent (same depth, weights > 0, not a prefix of another queue's path); then
the parent/child rules in `webhook.queues.hierarchy`. DELETE: `default` and `root` are protected, the queue must
exist, have no child queues and (optionally) no allocated pods.

Every guaranteed resource needs a `deserved` that covers it, as in Volcano since v1.13 — a queue written for
the proportion plugin with a guarantee and no deserved (the overview's `ml-training` example) is refused there
and here alike. Every violated resource rule is reported, in Volcano's order (capability and deserved
quantities, then per guaranteed resource its quantity and its deserved, then deserved against capability), with
quantities printed as Go prints them. Field errors read `requestBody.spec...: Invalid value: ...` and several
are joined as `[a, b]`, as apimachinery's aggregate prints them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from lapilli.api.constants import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION
from lapilli.meta import annotations_of, name_of
from lapilli.resources import QuantityError, parse_quantity
from webhook.context import DEFAULT_QUEUE, ROOT_QUEUE, AdmissionContext
from webhook.goquantity import go_string
from webhook.queues.resources import parsed, quantity_errors, raw_list
from webhook.queueview import children, not_found, spec_of, state_of

HIERARCHY: Final = HIERARCHY_ANNOTATION
HIERARCHY_WEIGHTS: Final = HIERARCHY_WEIGHTS_ANNOTATION
_GO_FLOAT: Final = re.compile(r"^[+-]?(\d[\d_]*\.?[\d_]*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf(inity)?|nan)$", re.I)


def aggregate(errors: list[str]) -> str:
    """`utilerrors.NewAggregate(errs).Error()`: one error plainly, several de-duplicated inside `[...]`."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _invalid(path: str, value: object, detail: str) -> str:
    return f'{path}: Invalid value: "{value}": {detail}'


def _shown(value: object) -> str:
    """`Quantity.String()` of a quantity that parsed (unparseable ones are reported, never compared)."""
    return go_string(value)  # type: ignore[arg-type]


def resource_errors(spec: Mapping[str, Any]) -> list[str]:
    """`validateResourceQuantityOfQueue`: every violation, none dropped after the first."""
    base = "requestBody.spec"
    errors: list[str] = []
    for field in ("capability", "deserved"):
        for name, value in raw_list(spec, field).items():
            errors += quantity_errors(value, str(name), f"{base}.{field}.{name}")
    capability, deserved = parsed(spec, "capability"), parsed(spec, "deserved")
    raw_deserved, raw_capability = raw_list(spec, "deserved"), raw_list(spec, "capability")
    guaranteed = parsed(spec, "guarantee")
    for name, value in raw_list(spec, "guarantee").items():
        errors += quantity_errors(value, str(name), f"{base}.guarantee.resource.{name}")
        if name not in guaranteed:
            continue
        shown = _shown(value)
        if name not in raw_deserved:
            detail = f"deserved[{name}] must be >= guarantee[{name}]={shown}"
            errors.append(_invalid(f"{base}.deserved.{name}", "<nil>", detail))
        elif name in deserved and deserved[name] < guaranteed[name]:
            have = _shown(raw_deserved[name])
            detail = f"deserved[{name}]={have} must be >= guarantee[{name}]={shown}"
            errors.append(_invalid(f"{base}.deserved.{name}", have, detail))
    for name, value in deserved.items():
        if name in capability and value > capability[name]:
            have, limit = _shown(raw_deserved[name]), _shown(raw_capability[name])
            detail = f"deserved[{name}]={have} must be <= capability[{name}]={limit}"
            errors.append(_invalid(f"{base}.deserved.{name}", have, detail))
    return errors


def _go_float(text: str) -> float | None:
    """`strconv.ParseFloat(s, 64)` for decimal text (no surrounding spaces, `_` only between digits)."""
    if not _GO_FLOAT.match(text) or "__" in text or text.endswith("_"):
        return None
    try:
        return float(text.replace("_", ""))
    except ValueError:
        return None


def hierarchy_annotation_error(queue: Mapping[str, Any], ctx: AdmissionContext) -> str:
    annotations = annotations_of(queue)
    hierarchy, weights = str(annotations.get(HIERARCHY) or ""), str(annotations.get(HIERARCHY_WEIGHTS) or "")
    if not hierarchy and not weights:
        return ""
    path = "requestBody.metadata.annotations"
    if len(hierarchy.split("/")) != len(weights.split("/")):
        return _invalid(path, hierarchy, f"{HIERARCHY} must have the same length with {HIERARCHY_WEIGHTS}")
    for weight in weights.split("/"):
        value = _go_float(weight)
        if value is None:
            error = f'strconv.ParseFloat: parsing "{weight}": invalid syntax'
            return _invalid(path, weights, f"{weight} in the {weights} is invalid number: {error}")
        if value <= 0 and not math.isnan(value):
            return _invalid(path, weights, f"{weight} in the {weights} must be larger than 0")
    for other in ctx.queues.list():
        theirs = str(annotations_of(other).get(HIERARCHY) or "")
        if theirs and name_of(other) != name_of(queue) and theirs.startswith(hierarchy + "/"):
            detail = f"{hierarchy} is not allowed to be in the sub path of {theirs} of queue {name_of(other)}"
            return _invalid(path, hierarchy, detail)
    return ""


def basic_error(queue: Mapping[str, Any], ctx: AdmissionContext) -> str:
    """`validateQueue`: resources, state, hierarchy annotations (aggregated)."""
    errors = resource_errors(spec_of(queue))
    state = state_of(queue)
    if state and state not in ("Open", "Closed"):
        errors.append(_invalid("requestBody.spec.state", state, "queue state must be in [Open Closed]"))
    if annotation_error := hierarchy_annotation_error(queue, ctx):
        errors.append(annotation_error)
    return aggregate(errors) if errors else ""


def allocated_pods(queue: Mapping[str, Any]) -> int:
    """`status.allocated.pods` (whole pods; 0 when absent or unreadable)."""
    status = queue.get("status")
    allocated = status.get("allocated") if isinstance(status, Mapping) else None
    value = allocated.get("pods") if isinstance(allocated, Mapping) else None
    try:
        return math.ceil(parse_quantity(value)) if value is not None else 0
    except QuantityError:
        return 0


def delete_error(name: str, ctx: AdmissionContext, stored: Mapping[str, Any] | None = None) -> tuple[str, bool]:
    """`validateQueueDeleting`: (message, forbidden). `stored` is the Queue kube-apiserver is deleting (the review's
    `oldObject`): it proves the queue exists when the cache has not seen it yet — a queue created a moment before,
    which Volcano's lister would call not found."""
    if name in (DEFAULT_QUEUE, ROOT_QUEUE):
        return f"`{name}` queue can not be deleted", True
    queue = ctx.queues.get(name) or stored
    if queue is None:
        return not_found(name), False
    if ctx.settings.queue_allocated_pods_check and (pods := allocated_pods(queue)) > 0:
        return f"queue {name} cannot be deleted because it has allocated Pods: {pods}", True
    if kids := children(ctx.queues, name):
        names = ", ".join(name_of(k) for k in kids)
        return f"queue {name} can not be deleted because it has {len(kids)} child queues: {names}", True
    return "", False
