"""Turn a Kubernetes document of a Volcano kind into its model, choosing the model by apiVersion and kind.

Counterpart: the scheme registration of Volcano's clientset (`register.go` of each API group), which is how Go code
decodes an object of unknown kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast

from lapilli.api.command import Command
from lapilli.api.common import TopLevelModel
from lapilli.api.hypernode import HyperNode
from lapilli.api.job import Job
from lapilli.api.podgroup import PodGroup
from lapilli.api.queue import Queue

VolcanoObject = Queue | PodGroup | Job | Command | HyperNode

MODELS: Final[Mapping[tuple[str, str], type[TopLevelModel]]] = {
    (model.model_fields["api_version"].default, model.model_fields["kind"].default): model
    for model in (Queue, PodGroup, Job, Command, HyperNode)
}
"""(apiVersion, kind) → model class, for every kind Lapilli understands."""


def model_for(api_version: str, kind: str) -> type[TopLevelModel] | None:
    """The model class for an apiVersion and kind, or None when Lapilli has no model of it."""
    return MODELS.get((api_version, kind))


def parse_object(doc: Mapping[str, Any]) -> VolcanoObject:
    """Validate a Volcano object given as a dict (one YAML/JSON document) into its model.

    Raises ValueError naming the apiVersion and kind when the document is not a Volcano Queue, PodGroup, Job,
    Command or HyperNode, and pydantic's ValidationError (also a ValueError) listing each bad field by its wire
    path otherwise.
    """
    if not isinstance(doc, Mapping):
        raise ValueError(f"expected a Kubernetes object (a mapping), got {type(doc).__name__}")
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
        raise ValueError(f"not a Kubernetes object: apiVersion={api_version!r}, kind={kind!r} (both must be set)")
    model = model_for(api_version, kind)
    if model is None:
        known = ", ".join(f"{k} ({v})" for v, k in sorted(MODELS))
        raise ValueError(f"unknown kind {kind!r} in apiVersion {api_version!r}; Lapilli models {known}")
    # MODELS holds exactly the classes of VolcanoObject.
    return cast(VolcanoObject, model.from_wire(doc))
