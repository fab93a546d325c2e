"""Queue defaulting — Volcano's `pkg/webhooks/admission/queues/mutate/mutate_queue.go` (CREATE only).

`volcano.sh/hierarchy` not starting at `root` gets `root/` (and `1/` on `volcano.sh/hierarchy-weights`) when
both annotations are set; `spec.reclaimable` := true when absent; `spec.weight` := 1 when 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from lapilli.api.constants import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION
from lapilli.meta import meta
from webhook.context import AdmissionContext
from webhook.decode import DecodeError, boolean, integer, mapping, string_map
from webhook.outcome import Outcome, PatchOp, allow, deny, escape
from webhook.review import AdmissionRequest

HIERARCHY: Final = HIERARCHY_ANNOTATION
HIERARCHY_WEIGHTS: Final = HIERARCHY_WEIGHTS_ANNOTATION


def _annotation_ops(meta: Mapping[str, Any], warnings: list[str]) -> list[PatchOp]:
    annotations = meta.get("annotations")
    if not isinstance(annotations, Mapping):
        return []
    hierarchy, weights = annotations.get(HIERARCHY), annotations.get(HIERARCHY_WEIGHTS)
    if not (isinstance(hierarchy, str) and isinstance(weights, str) and hierarchy and weights):
        return []
    if hierarchy.startswith("root"):
        return []
    warnings.append(f"{HIERARCHY} {hierarchy} placed under root/")
    base = "/metadata/annotations/"
    return [
        {"op": "add", "path": base + escape(HIERARCHY), "value": f"root/{hierarchy}"},
        {"op": "add", "path": base + escape(HIERARCHY_WEIGHTS), "value": f"1/{weights}"},
    ]


def queue_patch(obj: Mapping[str, Any]) -> tuple[list[PatchOp], list[str]]:
    warnings: list[str] = []
    ops = _annotation_ops(meta(obj), warnings)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        ops.append({"op": "add", "path": "/spec", "value": {}})
        spec = {}
    if spec.get("reclaimable") is None:
        ops.append({"op": "add", "path": "/spec/reclaimable", "value": True})
    if not spec.get("weight"):
        ops.append({"op": "add", "path": "/spec/weight", "value": 1})
        if "weight" in spec:
            warnings.append("spec.weight 0 replaced by the default 1")
    return ops, warnings


def mutate_queue(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/queues/mutate`."""
    if request.operation != "CREATE":
        return allow()
    if request.object is None:
        return deny("object: expected a Queue, got null")
    try:
        spec = mapping(request.object, "spec", "")
        integer(spec, "weight", "spec")
        boolean(spec, "reclaimable", "spec")
        string_map(mapping(request.object, "metadata", ""), "annotations", "metadata")
    except DecodeError as exc:
        return deny(str(exc))
    ops, warnings = queue_patch(request.object)
    return allow(ops, warnings)
