"""Resource groups from `--admission-conf`: Volcano's pod mutation that steers a pod to a group of nodes.

Mirrors Volcano's `pkg/webhooks/config` (the file: `resourceGroups[]` of `resourceGroup`, `object{key, value[]}`,
`schedulerName`, `tolerations`, `labels`, `affinity` as a JSON string) and `pkg/webhooks/admission/pods/mutate`
(which pod belongs to a group, and the patch). A pod belongs to the first group that matches it:
* `object.key: namespace` — the pod's namespace is one of `value`;
* `object.key: annotation`, or no key — some `value` item, read as YAML `key: value`, equals the pod's annotation
  of that key; with no key, also a pod annotated `volcano.sh/resource-group: <resourceGroup>`;
* any other key never matches (as Volcano; reported once at load).
The group then sets the pod's `nodeSelector` (its own merged with the group's labels), its `affinity` (only when
the pod has none), its `tolerations` (the group's appended) and its `schedulerName`.

Lapilli reads the file strictly where Volcano would silently drop what it cannot use: an `affinity` that is not a
JSON object, a toleration or label of the wrong shape refuses the file (at start: the settings check; later: the
last good file stays in use).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from lapilli.meta import annotations_of
from lapilli.reload import ReloadingFile

RESOURCE_GROUP_ANNOTATION: Final = "volcano.sh/resource-group"
KEYS: Final = ("", "namespace", "annotation")
log = logging.getLogger(__name__)


_FILE: Final = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class GroupObject(BaseModel):
    model_config = _FILE

    key: str = ""
    value: list[str] = Field(default_factory=list)


class Toleration(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class ResourceGroup(BaseModel):
    model_config = _FILE

    resource_group: str = ""
    object: GroupObject = Field(default_factory=GroupObject)
    scheduler_name: str = ""
    tolerations: list[Toleration] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)
    affinity: str = ""

    @field_validator("affinity")
    @classmethod
    def _affinity_is_a_json_object(cls, text: str) -> str:
        if text:
            try:
                parsed = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"is not JSON ({exc})") from None
            if not isinstance(parsed, dict):
                raise ValueError("is not a JSON object (a pod's spec.affinity)")
        return text

    def annotations(self) -> dict[str, str]:
        """The `key: value` pairs of `object.value` (items that do not read as one are skipped, as Volcano)."""
        out: dict[str, str] = {}
        for item in self.object.value:
            try:
                pairs = yaml.safe_load(item)
            except yaml.YAMLError:
                continue
            if isinstance(pairs, dict):
                for key, value in pairs.items():
                    out.setdefault(str(key), str(value))  # mergo.Merge keeps what an earlier item set
        return out

    def matches(self, pod: Mapping[str, Any], namespace: str) -> bool:
        key = self.object.key
        if key == "namespace":
            return namespace in self.object.value
        if key not in ("", "annotation"):
            return False
        annotations = annotations_of(pod)
        if any(annotations.get(k) == v for k, v in self.annotations().items()):
            return True
        return key == "" and annotations.get(RESOURCE_GROUP_ANNOTATION) == self.resource_group

    def patch(self, pod: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Volcano's JSON patch for a pod of this group, in its order."""
        spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        ops: list[dict[str, Any]] = []
        if self.labels:
            selector = {**(spec.get("nodeSelector") or {}), **self.labels}
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": selector})
        if self.affinity and not spec.get("affinity"):
            ops.append({"op": "add", "path": "/spec/affinity", "value": orjson.loads(self.affinity)})
        if self.tolerations:
            added = [t.model_dump(by_alias=True, exclude_defaults=True) for t in self.tolerations]
            ops.append({"op": "add", "path": "/spec/tolerations", "value": [*(spec.get("tolerations") or []), *added]})
        if self.scheduler_name:
            ops.append({"op": "add", "path": "/spec/schedulerName", "value": self.scheduler_name})
        return ops


class AdmissionConf(BaseModel):
    model_config = _FILE

    resource_groups: list[ResourceGroup] = Field(default_factory=list)

    def group_of(self, pod: Mapping[str, Any], namespace: str) -> ResourceGroup | None:
        return next((group for group in self.resource_groups if group.matches(pod, namespace)), None)


def watched(path: Path | None) -> Callable[[], AdmissionConf]:
    """The groups of the file at `path` as they are now: re-read when it changes, the last good ones kept when it
    cannot be used; no groups without a file. The file must have passed the settings check."""
    if path is None:
        return AdmissionConf
    return ReloadingFile(path, parse_admission_conf, "admission configuration").refresh


def parse_admission_conf(text: str) -> AdmissionConf:
    """The file's text as Volcano reads it; ValueError with a readable reason when it cannot be used."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"is not YAML: {' '.join(str(exc).split())}") from None
    if raw is None:
        raise ValueError("is empty")
    try:
        conf = AdmissionConf.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"{where}: {first['msg']}") from None
    for group in conf.resource_groups:
        if group.object.key not in KEYS:
            log.warning("resource group %r: object.key %r is neither namespace nor annotation: it matches no pod",
                        group.resource_group, group.object.key)
    return conf
