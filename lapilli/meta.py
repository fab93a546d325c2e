"""Reading `metadata` of a Kubernetes object held as a raw JSON dict (what the watch, the API and admission give).

Counterpart: apimachinery's `meta.Accessor` and client-go's `MetaNamespaceKeyFunc`. Every reader is defensive:
a missing, null or wrongly typed `metadata` (or field inside it) reads as empty, never raises, so the same
accessors serve the watch cache (well-formed objects) and admission (whatever a client sent). Pure: the engine
may use it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

Obj = Mapping[str, Any]
"""A Kubernetes object as decoded JSON, read only (what a watch, the API or an AdmissionReview gives)."""
MutableObj = dict[str, Any]
"""A Kubernetes object as decoded JSON that its holder may change (a cache's stored copy, a body being built)."""
JSON: TypeAlias = str | int | float | bool | Sequence["JSON"] | Mapping[str, "JSON"] | None
"""Any JSON value, as data handed out for encoding (reports, `-o json`)."""


def as_json(value: object, depth: int = 64) -> JSON:
    """A decoded document's value as `JSON`, to be handed out again: JSON's own types as they are (containers
    copied), a YAML timestamp or date as the RFC 3339 text an encoder writes for it, anything else YAML can
    decode (binary, a set) as its `str` rather than a value no encoder takes. Containers nested deeper than
    `depth` read as null: no Kubernetes schema nests so deep, and a hostile document must not exhaust the stack."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping | list | tuple) and depth <= 0:
        return None
    if isinstance(value, Mapping):
        return {str(k): as_json(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v, depth - 1) for v in value]
    if isinstance(value, datetime.date):  # datetime too
        return value.isoformat()
    return str(value)


__all__ = [
    "JSON",
    "MutableObj",
    "Obj",
    "annotations_of",
    "as_json",
    "describe",
    "is_deleting",
    "key_of",
    "labels_of",
    "meta",
    "name_of",
    "namespace_of",
    "owner_references",
    "resource_version",
    "revision",
    "section",
    "uid_of",
]


def section(obj: Mapping[str, Any] | None, key: str) -> Mapping[str, Any]:
    """A top-level object of `obj` (`metadata`, `spec`, `status`...); absent, null or not an object: empty."""
    value = obj.get(key) if obj is not None else None
    return value if isinstance(value, Mapping) else {}


def meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`obj.metadata`, empty when there is none."""
    return section(obj, "metadata")


def name_of(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("namespace") or "")


def uid_of(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("uid") or "")


def key_of(obj: Mapping[str, Any] | None) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object (client-go's MetaNamespaceKeyFunc)."""
    m = meta(obj)
    name = str(m.get("name") or "")
    return f"{m['namespace']}/{name}" if m.get("namespace") else name


def resource_version(obj: Mapping[str, Any] | None) -> str:
    return str(meta(obj).get("resourceVersion") or "")


def revision(obj: Mapping[str, Any] | None) -> int:
    """The resourceVersion as an integer (etcd revisions are; anything else sorts first, as -1)."""
    text = resource_version(obj)
    return int(text) if text.isdigit() else -1


def labels_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return section(meta(obj), "labels")


def annotations_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return section(meta(obj), "annotations")


def owner_references(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """`metadata.ownerReferences`, keeping only the entries that are objects."""
    refs = meta(obj).get("ownerReferences")
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def describe(obj: Mapping[str, Any] | None) -> str:
    """`Kind namespace/name` (`?` for what is missing), for messages about a document a user wrote."""
    kind = (obj or {}).get("kind") or "?"
    ns = namespace_of(obj)
    return f"{kind} {f'{ns}/' if ns else ''}{name_of(obj) or '?'}"


def without_managed_fields(obj: MutableObj) -> MutableObj:
    """`obj` without `metadata.managedFields` (a Reflector transform, client-go's usual one): server-side apply's
    field ownership, a third of a Pod's JSON, which nothing that schedules or controls pods reads."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return obj


# What of a Pod nothing in the service reads: its volumes and their mounts (the service-account token volume every
# pod gets is a third of a running pod's decoded size; volumes are neither scheduled nor controlled here) and the
# kubelet's conditions (status is read for its phase, its container statuses and kube-scheduler's PodScheduled,
# which the PodGroup controller reads).
_POD_CONTAINERS: Final = ("initContainers", "containers", "ephemeralContainers")
_KEPT_CONDITIONS: Final = frozenset({"PodScheduled"})


def slim_pod(obj: MutableObj) -> MutableObj:
    """`obj`, a Pod, without what nothing that schedules or controls pods here reads (a Reflector transform): its
    managedFields, `spec.volumes`, its containers' `volumeMounts` and `status.conditions` but PodScheduled. A stored
    Pod is never written back whole (pods are patched), so nothing dropped here can be lost from the cluster."""
    without_managed_fields(obj)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.pop("volumes", None)
        for field in _POD_CONTAINERS:
            for container in spec.get(field) or ():
                if isinstance(container, dict):
                    container.pop("volumeMounts", None)
    status = obj.get("status")
    if isinstance(status, dict) and isinstance(conditions := status.get("conditions"), list):
        kept = [c for c in conditions if isinstance(c, dict) and c.get("type") in _KEPT_CONDITIONS]
        if kept:
            status["conditions"] = kept
        else:
            del status["conditions"]
    return obj


def only_metadata(obj: MutableObj) -> MutableObj:
    """What a Reflector store must keep of an object whose handlers have read it whole: its kind and metadata (the
    key, uid and resourceVersion a relist is diffed by, and what a deletion's handler reads)."""
    kept: MutableObj = {"metadata": obj.get("metadata") or {}}
    for key in ("apiVersion", "kind"):
        if key in obj:
            kept[key] = obj[key]
    return kept


def is_deleting(obj: Mapping[str, Any] | None) -> bool:
    """The object carries a `deletionTimestamp`: it is going, finalizers permitting."""
    return bool(meta(obj).get("deletionTimestamp"))


def pointer_token(key: str) -> str:
    """`key` as one JSON-pointer token (RFC 6901: `~` → `~0`, `/` → `~1`), for a JSON patch path through a label or
    annotation key (they contain `/`)."""
    return key.replace("~", "~0").replace("/", "~1")
