"""manifests/crds: the CRD schemas and the lapilli.api models agree field by field (names, types, enums, required
fields, defaults, bounds); the CRDs have Volcano's names, printer columns and subresources; they use nothing
kube-apiserver 1.20 lacks; and every example and full fixture validates against them without losing a field."""

from __future__ import annotations

import importlib.util
import re
import types
import typing
from enum import StrEnum
from pathlib import Path
from typing import Any

import annotated_types
import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from lapilli.api import MODELS, Command, HyperNode, Job, PodGroup, Queue, TopLevelModel
from lapilli.api import constants as C
from lapilli.api.common import INT32_MAX, INT32_MIN, QUANTITY_PATTERN, Timestamp, ValueRule


def _sibling(name: str) -> types.ModuleType:
    # Loaded by path so the shared fixtures work under any pytest import mode.
    spec = importlib.util.spec_from_file_location(f"_lapilli_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fx = _sibling("test_api_fixtures")

CRD_FILES = {
    Job: "batch.volcano.sh_jobs.yaml",
    PodGroup: "scheduling.volcano.sh_podgroups.yaml",
    Queue: "scheduling.volcano.sh_queues.yaml",
    Command: "bus.volcano.sh_commands.yaml",
    HyperNode: "topology.volcano.sh_hypernodes.yaml",
}
# Deliberate differences between a model and its CRD, each with its reason.
EXPECTED_DIFFERENCES = {
    # The queue mutating webhook turns weight 0 into 1, and it sees the object before schema validation does.
    ("Queue", ".spec.weight", "minimum"),
    # Volcano's CRD does not require a HyperNode's spec; one without members is refused by the webhook, as
    # Volcano's is, so the model may require it and code reading a HyperNode never meets a missing spec.
    ("HyperNode", "", "required"),
}
# Printer columns whose type is not their field's, as Volcano's CRD has them.
COLUMN_TYPES_AS_VOLCANO = {("HyperNode", ".spec.tier")}


def _crd(model: type[TopLevelModel]) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load((fx.CRD_DIR / CRD_FILES[model]).read_text())
    return crd


def _schema(model: type[TopLevelModel]) -> dict[str, Any]:
    (version,) = _crd(model)["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _walk(node: dict[str, Any], path: str = "") -> typing.Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path (`.spec.tasks[].name`, `.spec.plugins{}`)."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


# --- the CRD objects themselves --------------------------------------------------------------------------------


def test_kustomization_lists_exactly_the_crds():
    kustomization = yaml.safe_load((fx.CRD_DIR / "kustomization.yaml").read_text())
    on_disk = {p.name for p in fx.CRD_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(on_disk) == sorted(CRD_FILES.values())


@pytest.mark.parametrize(
    ("model", "group", "version", "plural", "singular", "short_names", "scope"),
    [
        (Job, C.BATCH_GROUP, C.BATCH_VERSION, C.JOB_PLURAL, C.JOB_SINGULAR, ["vcjob", "vj"], "Namespaced"),
        (
            PodGroup,
            C.SCHEDULING_GROUP,
            C.SCHEDULING_VERSION,
            "podgroups",
            "podgroup",
            ["pg", "podgroup-v1beta1"],
            "Namespaced",
        ),
        (Queue, C.SCHEDULING_GROUP, C.SCHEDULING_VERSION, "queues", "queue", ["q", "queue-v1beta1"], "Cluster"),
        (Command, C.BUS_GROUP, C.BUS_VERSION, C.COMMAND_PLURAL, C.COMMAND_SINGULAR, None, "Namespaced"),
        (HyperNode, C.TOPOLOGY_GROUP, C.TOPOLOGY_VERSION, C.HYPERNODE_PLURAL, C.HYPERNODE_SINGULAR, ["hn"], "Cluster"),
    ],
)
def test_crd_names_scope_and_version(model, group, version, plural, singular, short_names, scope):
    crd = _crd(model)
    kind = model.model_fields["kind"].default
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1" and crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == (group, scope)
    names = spec["names"]
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        kind,
        f"{kind}List",
        plural,
        singular,
    )
    assert names.get("shortNames") == short_names
    (served,) = spec["versions"]
    assert (served["name"], served["served"], served["storage"]) == (version, True, True)
    assert model.model_fields["api_version"].default == f"{group}/{version}"


@pytest.mark.parametrize("model", [Job, PodGroup, Queue, Command, HyperNode])
def test_status_subresource_exactly_when_there_is_a_status(model):
    (version,) = _crd(model)["spec"]["versions"]
    has_status = "status" in model.model_fields
    assert ("status" in _schema(model)["properties"]) == has_status
    assert version.get("subresources", {}) == ({"status": {}} if has_status else {})


@pytest.mark.parametrize(
    ("model", "columns"),
    [
        (
            Job,
            [
                ("STATUS", "string", ".status.state.phase"),
                ("MINAVAILABLE", "integer", ".status.minAvailable"),
                ("RUNNINGS", "integer", ".status.running"),
                ("AGE", "date", ".metadata.creationTimestamp"),
                ("QUEUE", "string", ".spec.queue"),
            ],
        ),
        (
            PodGroup,
            [
                ("STATUS", "string", ".status.phase"),
                ("MINMEMBER", "integer", ".spec.minMember"),
                ("RUNNINGS", "integer", ".status.running"),
                ("AGE", "date", ".metadata.creationTimestamp"),
                ("QUEUE", "string", ".spec.queue"),
            ],
        ),
        (
            Queue,
            [
                ("STATE", "string", ".status.state"),
                ("WEIGHT", "integer", ".spec.weight"),
                ("PARENT", "string", ".spec.parent"),
                ("AGE", "date", ".metadata.creationTimestamp"),
            ],
        ),
        (Command, []),
        (
            HyperNode,
            [
                ("Tier", "string", ".spec.tier"),
                ("TierName", "string", ".spec.tierName"),
                ("NodeCount", "integer", ".status.nodeCount"),
                ("Age", "date", ".metadata.creationTimestamp"),
            ],
        ),
    ],
)
def test_printer_columns(model, columns):
    (version,) = _crd(model)["spec"]["versions"]
    got = version.get("additionalPrinterColumns", [])
    assert [(c["name"], c["type"], c["jsonPath"]) for c in got] == columns
    assert all(c.get("priority", 0) == 0 for c in got), "every column shows without -o wide"
    nodes = dict(_walk(_schema(model)))
    for _, kind, json_path in columns:
        if json_path.startswith(".metadata."):
            continue
        assert json_path in nodes, f"{json_path} is not in the schema"
        if (model.__name__, json_path) not in COLUMN_TYPES_AS_VOLCANO:
            assert nodes[json_path]["type"] == kind


# --- what kube-apiserver 1.20 accepts --------------------------------------------------------------------------


@pytest.mark.parametrize("model", [Job, PodGroup, Queue, Command, HyperNode])
def test_schema_is_structural_and_free_of_newer_features(model):
    schema = _schema(model)
    text = (fx.CRD_DIR / CRD_FILES[model]).read_text()
    assert "x-kubernetes-validations" not in text, "CEL rules need kube-apiserver 1.25+"
    assert not re.search(r"(:|-)\s+[&*][A-Za-z]", text), "YAML anchors and aliases trip some kustomize versions"
    assert schema["type"] == "object"
    for path, node in _walk(schema):
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            assert node["pattern"] == QUANTITY_PATTERN, path
            continue
        assert node.get("type") in {"object", "array", "string", "integer", "boolean"}, path
        assert "anyOf" not in node and "oneOf" not in node and "allOf" not in node, path
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert node["type"] == "object" and "properties" not in node, path
        if node["type"] == "array":
            assert isinstance(node.get("items"), dict), path
        if "default" in node:
            assert _validate(node["default"], node) == [], f"default of {path} is invalid"
        if "enum" in node:
            assert len(set(node["enum"])) == len(node["enum"]), path
    # Only name/generateName may be constrained under metadata, and we leave it to Kubernetes.
    assert schema["properties"]["metadata"] == {"type": "object"}


# --- model ⇔ schema --------------------------------------------------------------------------------------------


def _unwrap(annotation: Any) -> tuple[Any, list[Any], bool]:
    """(core type, constraint metadata, is_timestamp) through Annotated and Optional."""
    metadata: list[Any] = []
    is_timestamp = False
    while True:
        if annotation == Timestamp:
            is_timestamp = True
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation, *extras = typing.get_args(annotation)
            for extra in extras:
                metadata.extend(extra.metadata if isinstance(extra, FieldInfo) else [extra])
            continue
        if origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
            if set(members) == {str, int, float}:
                return "quantity", metadata, is_timestamp
            raise AssertionError(f"unexpected union {annotation}")
        return annotation, metadata, is_timestamp


def _bounds(metadata: list[Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            found["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            found["maximum"] = item.le
        elif isinstance(item, annotated_types.MinLen):
            found["min_length"] = item.min_length
        elif isinstance(item, annotated_types.MaxLen):
            found["maxLength"] = item.max_length
        elif isinstance(item, ValueRule):  # a value rule the webhook's shape-only reading skips
            for key, value in item.keywords.items():
                found[{"minItems": "min_length", "minLength": "min_length"}.get(key, key)] = value
        elif getattr(item, "pattern", None) is not None:
            found["pattern"] = item.pattern
    return found


def _is_zero(value: Any) -> bool:
    """Go's zero value, or a sub-object: a model default that needs no CRD default."""
    return value is None or isinstance(value, BaseModel) or value in (0, "", False, {}, [])


class _Comparison:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.errors: list[str] = []

    def check(self, ok: bool, path: str, what: str, message: str) -> None:
        if not ok and (self.kind, path, what) not in EXPECTED_DIFFERENCES:
            self.errors.append(f"{path or '<root>'}: {message}")

    def value(self, annotation: Any, node: dict[str, Any], path: str, metadata: list[Any]) -> None:
        core, inner_metadata, is_timestamp = _unwrap(annotation)
        metadata = metadata + inner_metadata
        # A required Timestamp field reaches here as `str` with the Timestamp's validators in its metadata.
        is_timestamp = is_timestamp or any(m is t for m in metadata for t in typing.get_args(Timestamp)[1:])
        if core == "quantity":
            self.check(
                bool(node.get("x-kubernetes-int-or-string")), path, "type", "model quantity, CRD not int-or-string"
            )
            return
        origin = typing.get_origin(core)
        if origin is dict:
            _, value_type = typing.get_args(core)
            if value_type is Any:
                self.check(node.get("x-kubernetes-preserve-unknown-fields") is True, path, "type", "free-form in model")
                return
            self.check(node.get("type") == "object", path, "type", f"model map, CRD {node.get('type')}")
            self.check("properties" not in node, path, "type", "model map, CRD has fixed properties")
            self.value(value_type, node.get("additionalProperties") or {}, f"{path}{{}}", [])
        elif origin is list:
            (item_type,) = typing.get_args(core)
            self.check(node.get("type") == "array", path, "type", f"model list, CRD {node.get('type')}")
            self.check(node.get("minItems") == _bounds(metadata).get("min_length"), path, "minItems", "minItems")
            self.value(item_type, node.get("items") or {}, f"{path}[]", [])
        elif isinstance(core, type) and issubclass(core, BaseModel):
            self.model(core, node, path)
        elif isinstance(core, type) and issubclass(core, StrEnum):
            self.check(node.get("type") == "string", path, "type", "enum must be a string")
            model_values = [member.value for member in core]
            self.check(node.get("enum") == model_values, path, "enum", f"CRD enum {node.get('enum')} ≠ {model_values}")
        else:
            self.scalar(core, node, path, metadata, is_timestamp)
        if not (isinstance(core, type) and issubclass(core, StrEnum)):
            self.check("enum" not in node, path, "enum", "CRD enum on a field the model does not enumerate")

    def scalar(self, core: Any, node: dict[str, Any], path: str, metadata: list[Any], is_timestamp: bool) -> None:
        expected_type = {bool: "boolean", int: "integer", str: "string"}.get(core)
        self.check(node.get("type") == expected_type, path, "type", f"model {core}, CRD {node.get('type')}")
        bounds = _bounds(metadata)
        if core is int:
            int32 = node.get("format") == "int32"
            for key, implied in (("minimum", INT32_MIN), ("maximum", INT32_MAX)):
                crd_value = node.get(key, implied if int32 else None)
                self.check(bounds.get(key) == crd_value, path, key, f"{key}: model {bounds.get(key)}, CRD {crd_value}")
        if core is str:
            for key in ("maxLength", "pattern"):
                self.check(bounds.get(key) == node.get(key), path, key, f"{key}: model {bounds.get(key)} ≠ CRD")
            min_length = bounds.get("min_length")
            self.check(min_length == node.get("minLength"), path, "minLength", "minLength differs")
            self.check(is_timestamp == (node.get("format") == "date-time"), path, "format", "timestamp format")

    def model(self, model: type[BaseModel], node: dict[str, Any], path: str) -> None:
        self.check(node.get("type") == "object", path, "type", f"model {model.__name__}, CRD {node.get('type')}")
        properties: dict[str, Any] = node.get("properties", {})
        fields = {field.alias or name: field for name, field in model.model_fields.items()}
        self.check(set(fields) == set(properties), path, "properties", _difference(set(fields), set(properties)))
        required = sorted(alias for alias, field in fields.items() if field.is_required())
        self.check(required == sorted(node.get("required", [])), path, "required", f"required: model {required}")
        for alias, field in fields.items():
            if alias not in properties:
                continue
            child = properties[alias]
            child_path = f"{path}.{alias}"
            if path == "" and alias in ("apiVersion", "kind", "metadata"):
                # Type meta is checked against the CRD's names; ObjectMeta's schema belongs to Kubernetes.
                continue
            default = None if field.is_required() else field.get_default(call_default_factory=True)
            if "default" in child:
                self.check(default == child["default"], child_path, "default", f"default {default!r} ≠ CRD")
            else:
                self.check(_is_zero(default), child_path, "default", f"model default {default!r} missing in CRD")
            self.value(field.annotation, child, child_path, list(field.metadata))


def _difference(model: set[str], crd: set[str]) -> str:
    return f"only in model {sorted(model - crd)}, only in CRD {sorted(crd - model)}"


@pytest.mark.parametrize("model", [Job, PodGroup, Queue, Command, HyperNode])
def test_schema_and_model_agree_field_by_field(model):
    comparison = _Comparison(model.__name__)
    comparison.model(model, _schema(model), "")
    assert comparison.errors == []


def test_comparison_notices_a_disagreement():
    """The comparison above is only worth something if it fails on a drifted schema."""
    schema = _schema(Job)
    tasks = schema["properties"]["spec"]["properties"]["tasks"]["items"]["properties"]
    tasks["replicaCount"] = tasks.pop("replicas")
    tasks["policies"]["items"]["properties"]["event"]["enum"].remove("TaskFailed")
    schema["properties"]["spec"]["properties"]["maxRetry"]["default"] = 4
    schema["properties"]["status"]["properties"]["state"]["properties"]["lastTransitionTime"].pop("format")
    comparison = _Comparison("Job")
    comparison.model(Job, schema, "")
    problems = "\n".join(comparison.errors)
    assert "only in model ['replicas'], only in CRD ['replicaCount']" in problems
    assert ".spec.tasks[].policies[].event: CRD enum" in problems
    assert ".spec.maxRetry: default 3 ≠ CRD" in problems
    assert ".status.state.lastTransitionTime: timestamp format" in problems


# --- documents against the schema ------------------------------------------------------------------------------


def _validate(value: Any, node: dict[str, Any], path: str = "") -> list[str]:
    """A small OpenAPI v3 validator for the subset these CRDs use; unknown properties count as errors, since the
    API server would prune them and the document would not survive a round trip."""
    if node.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [f"{path}: {value!r} is neither integer nor string"]
        if isinstance(value, str) and not re.match(node["pattern"], value):
            return [f"{path}: {value!r} does not match the quantity pattern"]
        return []
    kind = node.get("type")
    python_types = {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}
    if not isinstance(value, python_types[kind]) or (kind == "integer" and isinstance(value, bool)):
        return [f"{path}: {value!r} is not of type {kind}"]
    errors: list[str] = []
    if "enum" in node and value not in node["enum"]:
        errors.append(f"{path}: {value!r} not in {node['enum']}")
    if kind == "integer" and not node.get("minimum", value) <= value <= node.get("maximum", value):
        errors.append(f"{path}: {value} out of bounds")
    if kind == "string":
        if len(value) > node.get("maxLength", len(value)) or len(value) < node.get("minLength", 0):
            errors.append(f"{path}: length of {value!r}")
        if "pattern" in node and not re.search(node["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {node['pattern']}")
        if node.get("format") == "date-time" and not re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", value):
            errors.append(f"{path}: {value!r} is not a date-time")
    if kind == "array":
        if len(value) < node.get("minItems", 0):
            errors.append(f"{path}: fewer than {node['minItems']} items")
        for index, item in enumerate(value):
            errors += _validate(item, node["items"], f"{path}[{index}]")
    if kind == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
        errors += [f"{path}: missing {key}" for key in node.get("required", []) if key not in value]
        properties = node.get("properties", {})
        for key, item in value.items():
            if key in properties:
                errors += _validate(item, properties[key], f"{path}.{key}")
            elif isinstance(node.get("additionalProperties"), dict):
                errors += _validate(item, node["additionalProperties"], f"{path}.{key}")
            elif path != ".metadata":  # the API server keeps metadata whatever the CRD says
                errors.append(f"{path}.{key}: unknown field (would be pruned)")
    return errors


def _documents() -> list[tuple[str, dict[str, Any]]]:
    docs = [
        (f"{name}:{doc['metadata'].get('name')}", doc) for name, doc in fx.example_documents() if fx.is_volcano(doc)
    ]
    docs += [(f"full:{kind}", doc) for kind, doc in fx.FULL_DOCUMENTS.items()]
    return docs


@pytest.mark.parametrize("item", _documents(), ids=lambda item: item[0])
def test_document_validates_against_its_crd_without_pruning(item):
    _, doc = item
    model = MODELS[(doc["apiVersion"], doc["kind"])]
    assert _validate(doc, _schema(model)) == []


def test_validator_rejects_what_the_api_server_rejects():
    schema = _schema(Job)
    bad = {
        "apiVersion": C.BATCH_API_VERSION,
        "kind": "Job",
        "metadata": {"name": "bad"},
        "spec": {
            "tasks": [{"name": "Bad_Name", "replicas": -1, "policies": [{"event": "Boom"}]}],
            "queue": "ok",
            "minAvaliable": 1,
        },
    }
    errors = "\n".join(_validate(bad, schema))
    assert ".spec.tasks[0].name" in errors
    assert ".spec.tasks[0].replicas: -1 out of bounds" in errors
    assert ".spec.tasks[0].policies[0].event: 'Boom'" in errors
    assert ".spec.minAvaliable: unknown field" in errors
    queue = {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "Queue", "spec": {"capability": {"cpu": "8 cores"}}}
    assert _validate(queue, _schema(Queue)) == [".spec.capability.cpu: '8 cores' does not match the quantity pattern"]


def test_empty_priority_class_name_is_refused_as_volcano_refuses_it():
    # Volcano's Job CRD has carried `maxLength: 253` and the DNS-subdomain pattern on spec.priorityClassName since
    # v1.14 (kubebuilder markers on JobSpec.PriorityClassName), so "" is refused there too; v1.13 and older took it.
    job = {"apiVersion": C.BATCH_API_VERSION, "kind": "Job", "metadata": {"name": "j"},
           "spec": {"priorityClassName": "", "tasks": [{"name": "t", "replicas": 1, "template": {}}]}}
    errors = _validate(job, _schema(Job))
    assert len(errors) == 1 and errors[0].startswith(".spec.priorityClassName: ''"), errors
    job["spec"]["priorityClassName"] = "high-priority"
    assert _validate(job, _schema(Job)) == []
