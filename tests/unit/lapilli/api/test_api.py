"""lapilli.api: examples parse and round-trip losslessly, CRD defaults apply without leaking, bad input is refused
with a readable error, and the constants cover every key of the reference."""

from __future__ import annotations

import copy
import importlib.util
import re
import types
import typing
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from lapilli.api import (
    MODELS,
    Action,
    Command,
    DequeueStrategy,
    Event,
    HyperNode,
    Job,
    JobPhase,
    JobSpec,
    LifecyclePolicy,
    MemberType,
    NetworkTopologyMode,
    NetworkTopologySpec,
    NumaPolicy,
    ObjectMeta,
    PartitionPolicySpec,
    PodGroup,
    PodGroupPhase,
    Queue,
    QueueSpec,
    QueueState,
    SubGroupPolicySpec,
    TaskSpec,
    TopLevelModel,
    parse_object,
)
from lapilli.api import constants as C
from lapilli.times import parse_duration
from tests.shared import shared_path


def _sibling(name: str) -> types.ModuleType:
    # Loaded by path so the shared fixtures work under any pytest import mode.
    spec = importlib.util.spec_from_file_location(f"_lapilli_{name}", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fx = _sibling("test_api_fixtures")

SEED_FILES = {
    "lifecycle-policies.yaml",
    "podgroup-training-job.yaml",
    "queue-ml-training.yaml",
    "queues-hierarchical.yaml",
    "queues-multi-tenant.yaml",
    "scheduler-conf-binpack.yaml",
    "scheduler-conf-default.yaml",
    "vcjob-mpi-8.yaml",
    "vcjob-mpi-gang.yaml",
    "vcjob-pytorch-ddp.yaml",
    "vcjob-spark.yaml",
    "vcjob-tf-training.yaml",
    "vcjob-torchrun-gang.yaml",
}
EXAMPLES = fx.example_documents()
VOLCANO_EXAMPLES = [(name, doc) for name, doc in EXAMPLES if fx.is_volcano(doc)]
OTHER_EXAMPLES = [(name, doc) for name, doc in EXAMPLES if not fx.is_volcano(doc)]


def _example_id(item: tuple[str, dict[str, Any]]) -> str:
    name, doc = item
    return f"{name}:{doc.get('kind')}/{(doc.get('metadata') or {}).get('name')}"


# --- examples --------------------------------------------------------------------------------------------------


def test_examples_hold_every_seed_manifest_unchanged():
    present = {path.name for path in fx.EXAMPLES_DIR.glob("*.yaml")}
    assert present >= SEED_FILES
    for name in sorted(SEED_FILES):
        assert (fx.EXAMPLES_DIR / name).read_bytes() == shared_path("seed-manifests", name).read_bytes(), name


def test_examples_contain_the_expected_volcano_objects():
    kinds = [doc["kind"] for _, doc in VOLCANO_EXAMPLES]
    assert kinds.count("Job") == 9
    assert kinds.count("PodGroup") == 1
    assert kinds.count("Queue") == 8


@pytest.mark.parametrize("item", VOLCANO_EXAMPLES, ids=_example_id)
def test_example_parses_to_its_kind_and_round_trips(item):
    _, doc = item
    original = copy.deepcopy(doc)
    obj = parse_object(doc)
    assert type(obj).__name__ == doc["kind"]
    assert obj.model_dump(by_alias=True, exclude_unset=True, mode="json") == original
    assert obj.to_wire() == original
    assert doc == original, "parse_object must not modify its input"


@pytest.mark.parametrize("item", OTHER_EXAMPLES, ids=_example_id)
def test_non_volcano_example_is_refused_by_name(item):
    _, doc = item
    with pytest.raises(ValueError) as err:
        parse_object(doc)
    message = str(err.value)
    if doc.get("kind"):
        assert repr(doc["kind"]) in message and repr(doc["apiVersion"]) in message
    else:
        assert "apiVersion=None" in message and "kind=None" in message


def test_examples_need_nothing_a_fresh_cluster_lacks():
    """Every queue, parent queue, namespace and PriorityClass an example names is defined by an example."""
    defined: dict[str, set[str]] = {"Queue": {C.DEFAULT_QUEUE, C.ROOT_QUEUE}, "Namespace": {"default"}}
    defined["PriorityClass"] = set()
    for _, doc in EXAMPLES:
        if doc.get("kind") in defined:
            defined[doc["kind"]].add(doc["metadata"]["name"])
    for name, doc in EXAMPLES:
        namespace = (doc.get("metadata") or {}).get("namespace")
        if namespace and namespace != "volcano-system":  # the scheduler ConfigMap's home, made by the installer
            assert namespace in defined["Namespace"], (name, namespace)
        if not fx.is_volcano(doc):
            continue
        obj = parse_object(doc)
        if isinstance(obj, Job | PodGroup):
            assert obj.spec.queue in defined["Queue"], (name, obj.spec.queue)
            if obj.spec.priority_class_name:
                assert obj.spec.priority_class_name in defined["PriorityClass"], name
        if isinstance(obj, Queue) and obj.spec.parent:
            assert obj.spec.parent in defined["Queue"], (name, obj.spec.parent)


# --- every field -----------------------------------------------------------------------------------------------


def _model_classes(annotation: Any) -> list[type[BaseModel]]:
    """Model classes inside a field annotation (through Optional, list, dict and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _model_classes(arg)]


def _all_fields(model: type[BaseModel], seen: set[tuple[type[BaseModel], str]]) -> None:
    for name, field in model.model_fields.items():
        if (model, name) in seen:
            continue
        seen.add((model, name))
        for inner in _model_classes(field.annotation):
            _all_fields(inner, seen)


def _fields_set(obj: Any, found: set[tuple[type[BaseModel], str]]) -> None:
    if isinstance(obj, BaseModel):
        found.update((type(obj), name) for name in obj.model_fields_set)
        for name in type(obj).model_fields:
            _fields_set(getattr(obj, name), found)
    elif isinstance(obj, dict):
        for value in obj.values():
            _fields_set(value, found)
    elif isinstance(obj, list):
        for value in obj:
            _fields_set(value, found)


def test_full_documents_set_every_field_of_every_model():
    every: set[tuple[type[BaseModel], str]] = set()
    for model in MODELS.values():
        _all_fields(model, every)
    found: set[tuple[type[BaseModel], str]] = set()
    for doc in fx.FULL_DOCUMENTS.values():
        _fields_set(parse_object(doc), found)
    missing = sorted(f"{model.__name__}.{name}" for model, name in every - found)
    assert not missing, f"add these fields to test_api_fixtures.py: {missing}"


@pytest.mark.parametrize("kind", sorted(fx.FULL_DOCUMENTS))
def test_full_document_round_trips_without_loss(kind):
    doc = fx.FULL_DOCUMENTS[kind]
    obj = parse_object(copy.deepcopy(doc))
    assert obj.to_wire() == doc
    # A second pass through the wire form is stable too.
    assert parse_object(obj.to_wire()).to_wire() == doc


def test_full_documents_read_as_typed_values():
    job = parse_object(fx.FULL_JOB)
    assert isinstance(job, Job)
    worker = job.spec.tasks[1]
    assert worker.partition_policy is not None and worker.partition_policy.min_partitions == 1
    assert job.spec.tasks[0].policies[1].events == [Event.POD_FAILED, Event.POD_EVICTED]
    assert job.spec.tasks[0].topology_policy is NumaPolicy.SINGLE_NUMA_NODE
    assert job.status.state.phase is JobPhase.RUNNING
    assert job.status.task_status_count["worker"].phase == {"Running": 3, "Pending": 1}
    assert job.spec.plugins["pytorch"] == ["--master=master", "--worker=worker", "--port=23456"]
    assert job.metadata.annotations[C.PREEMPTABLE_KEY] == "false"
    queue = parse_object(fx.FULL_QUEUE)
    assert isinstance(queue, Queue)
    assert queue.spec.capability == {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": 8}
    assert queue.spec.dequeue_strategy is DequeueStrategy.FIFO
    assert queue.status.state is QueueState.OPEN
    assert queue.metadata.model_extra == {"managedFields": [{"manager": "kubectl", "operation": "Apply"}]}
    pg = parse_object(fx.FULL_PODGROUP)
    assert isinstance(pg, PodGroup)
    assert pg.status.conditions[0].transition_id.startswith("0b5f3c1e")
    assert pg.metadata.owner_references[0].block_owner_deletion is True
    command = parse_object(fx.FULL_COMMAND)
    assert isinstance(command, Command)
    assert command.action is Action.ABORT_JOB and command.target is not None and command.target.kind == "Job"


def test_hypernode_reads_as_typed_values():
    hn = parse_object(fx.FULL_HYPERNODE)
    assert isinstance(hn, HyperNode)
    assert (hn.spec.tier, hn.spec.tier_name, hn.status.node_count) == (2, "spine", 12)
    assert [m.type for m in hn.spec.members] == [MemberType.HYPER_NODE, MemberType.HYPER_NODE, MemberType.NODE]
    assert [m.selector.kinds() for m in hn.spec.members] == [["exactMatch"], ["regexMatch"], ["labelMatch"]]
    two = {"exactMatch": {"name": "n1"}, "regexMatch": {"pattern": "n.*"}}
    doc = {"apiVersion": C.TOPOLOGY_API_VERSION, "kind": "HyperNode", "metadata": {"name": "h"},
           "spec": {"tier": 1, "members": [{"type": "Node", "selector": two}]}}
    selector = parse_object(doc)
    assert isinstance(selector, HyperNode) and selector.spec.members[0].selector.kinds() == ["exactMatch", "regexMatch"]


def test_hypernode_needs_a_spec_with_a_tier():
    doc: dict[str, Any] = {"apiVersion": C.TOPOLOGY_API_VERSION, "kind": "HyperNode", "metadata": {"name": "h"}}
    with pytest.raises(ValidationError, match="spec"):
        parse_object(doc)
    doc["spec"] = {"members": [{"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]}
    with pytest.raises(ValidationError, match=r"spec\.tier"):
        parse_object(doc)
    doc["spec"]["tier"] = -1
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        parse_object(doc)


# --- defaults --------------------------------------------------------------------------------------------------


def test_queue_defaults_are_the_crd_defaults_and_stay_unset():
    doc = {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "Queue", "metadata": {"name": "q"}}
    queue = parse_object(doc)
    assert isinstance(queue, Queue)
    assert queue.spec.weight == 1
    assert queue.spec.dequeue_strategy is DequeueStrategy.TRAVERSE
    # Not CRD defaults: the webhook sets reclaimable, the controller sets parent; the model must not.
    assert queue.spec.reclaimable is None
    assert queue.spec.parent == ""
    assert queue.status.state is None
    assert queue.to_wire() == doc


def test_podgroup_defaults_are_the_crd_defaults_and_stay_unset():
    doc = {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "PodGroup", "metadata": {"name": "pg"}, "spec": {}}
    pg = parse_object(doc)
    assert isinstance(pg, PodGroup)
    assert pg.spec.queue == C.DEFAULT_QUEUE
    assert pg.spec.min_member == 0
    assert pg.spec.min_resources is None  # nil minResources means "admit unconditionally" to enqueue
    assert pg.status.phase is None
    assert pg.to_wire() == doc


def test_job_defaults_are_the_crd_defaults_not_the_webhook_ones():
    doc = {
        "apiVersion": C.BATCH_API_VERSION,
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"tasks": [{"replicas": 2, "template": {}}]},
    }
    job = parse_object(doc)
    assert isinstance(job, Job)
    assert job.spec.queue == C.DEFAULT_QUEUE
    assert job.spec.max_retry == C.DEFAULT_MAX_RETRY == 3
    # The mutating webhook fills these in; the model leaves them empty so the webhook can tell.
    assert job.spec.scheduler_name == ""
    assert job.spec.min_available == 0
    task = job.spec.tasks[0]
    assert task.name == ""
    assert task.min_available is None
    assert task.max_retry == 0
    assert job.to_wire() == doc


def test_nested_crd_defaults():
    assert NetworkTopologySpec().mode is NetworkTopologyMode.HARD
    assert PartitionPolicySpec(total_partitions=2, partition_size=3).min_partitions == 0
    sub = SubGroupPolicySpec()
    assert (sub.sub_group_size, sub.min_sub_groups) == (1, 0)
    assert NetworkTopologySpec().to_wire() == {}


# --- building and changing objects in code ---------------------------------------------------------------------


def test_object_built_in_code_is_complete_on_the_wire():
    queue = Queue(metadata=ObjectMeta(name="q"), spec=QueueSpec(weight=2, reclaimable=True))
    assert queue.to_wire() == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"weight": 2, "reclaimable": True},
    }
    assert queue.name == "q" and queue.namespace == ""


def test_snake_case_and_camel_case_both_populate():
    by_alias = TaskSpec.model_validate({"minAvailable": 1, "maxRetry": 2, "topologyPolicy": "none"})
    by_name = TaskSpec(min_available=1, max_retry=2, topology_policy=NumaPolicy.NONE)
    assert by_alias == by_name
    assert by_name.to_wire() == {"minAvailable": 1, "maxRetry": 2, "topologyPolicy": "none"}


def test_changes_in_place_reach_the_wire():
    job = Job(metadata=ObjectMeta(name="j", namespace="ml"))
    job.status.state.phase = JobPhase.RUNNING
    job.status.running = 3
    job.metadata.labels[C.JOB_QUEUE_KEY] = "default"
    job.spec.tasks.append(TaskSpec(name="worker", replicas=3))
    assert job.to_wire() == {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ml", "labels": {"volcano.sh/queue-name": "default"}},
        "spec": {"tasks": [{"name": "worker", "replicas": 3}]},
        "status": {"state": {"phase": "Running"}, "running": 3},
    }


# --- refusals --------------------------------------------------------------------------------------------------


def _job_with_task(**task: Any) -> dict[str, Any]:
    return {"apiVersion": C.BATCH_API_VERSION, "kind": "Job", "metadata": {"name": "j"}, "spec": {"tasks": [task]}}


def _error(doc: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as err:
        parse_object(doc)
    return str(err.value)


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        (_job_with_task(policies=[{"event": "PodExploded", "action": "RestartJob"}]), "spec.tasks.0.policies.0.event"),
        (_job_with_task(policies=[{"event": "PodFailed", "action": "Reboot"}]), "spec.tasks.0.policies.0.action"),
        (_job_with_task(topologyPolicy="numa"), "spec.tasks.0.topologyPolicy"),
        (_job_with_task(dependsOn={"iteration": "some"}), "spec.tasks.0.dependsOn.iteration"),
        (
            {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "Queue", "status": {"state": "Opened"}},
            "status.state",
        ),
        (
            {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "Queue", "spec": {"dequeueStrategy": "lifo"}},
            "spec.dequeueStrategy",
        ),
        (
            {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "PodGroup", "status": {"phase": "Scheduled"}},
            "status.phase",
        ),
        (
            {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "PodGroup", "spec": {"networkTopology": {"mode": "x"}}},
            "spec.networkTopology.mode",
        ),
        (
            {"apiVersion": C.BATCH_API_VERSION, "kind": "Job", "status": {"state": {"phase": "Unknown"}}},
            "status.state.phase",
        ),
        ({"apiVersion": C.BUS_API_VERSION, "kind": "Command", "action": "Explode"}, "action"),
    ],
)
def test_enum_rejects_unknown_value_naming_field_and_choices(doc, where):
    message = _error(doc)
    assert where in message
    assert "Input should be" in message  # pydantic lists the accepted values after this


@pytest.mark.parametrize(
    ("enum", "doc_for"),
    [
        (Event, lambda v: _job_with_task(policies=[{"event": v}])),
        (Action, lambda v: _job_with_task(policies=[{"action": v}])),
        (QueueState, lambda v: {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "Queue", "status": {"state": v}}),
        (PodGroupPhase, lambda v: {"apiVersion": C.SCHEDULING_API_VERSION, "kind": "PodGroup", "status": {"phase": v}}),
        (JobPhase, lambda v: {"apiVersion": C.BATCH_API_VERSION, "kind": "Job", "status": {"state": {"phase": v}}}),
    ],
)
def test_enum_accepts_every_value_it_declares(enum: type[StrEnum], doc_for):
    for member in enum:
        doc = doc_for(member.value)
        assert parse_object(doc).to_wire() == doc


def test_enum_values_are_volcanos():
    assert [e.value for e in QueueState] == ["Open", "Closed", "Closing", "Unknown"]
    assert [e.value for e in PodGroupPhase] == ["Pending", "Running", "Unknown", "Inqueue", "Completed"]
    assert set(JobPhase) == {
        "Pending",
        "Aborting",
        "Aborted",
        "Running",
        "Restarting",
        "Completing",
        "Completed",
        "Terminating",
        "Terminated",
        "Failed",
    }
    assert Event.ANY == "*" and Event.JOB_UNKNOWN == "Unknown"
    assert {a.value for a in Action} >= {"AbortJob", "ResumeJob", "RestartPartition", "OpenQueue", "CloseQueue"}


def test_unknown_field_is_reported_as_a_typo():
    doc = _job_with_task(replicas=2)
    doc["spec"]["minAvaliable"] = 2
    message = _error(doc)
    assert "spec.minAvaliable" in message and "Extra inputs are not permitted" in message


def test_snake_case_names_are_not_wire_names():
    # The API server would prune `max_retry`; a manifest carrying it has a typo, whatever Python calls the field.
    doc = _job_with_task(replicas=1)
    doc["spec"]["max_retry"] = 5
    message = _error(doc)
    assert "spec.max_retry" in message and "Extra inputs are not permitted" in message


def test_unknown_metadata_fields_are_kept():
    doc = {
        "apiVersion": C.BUS_API_VERSION,
        "kind": "Command",
        "metadata": {"name": "c", "selfLink": "/x", "managedFields": [{"manager": "vcctl"}], "creationTimestamp": None},
    }
    assert parse_object(doc).to_wire() == doc


@pytest.mark.parametrize("value", ["500m", "2", "1.5Gi", "4k", "1e3", "+1", ".5", 8, 0.5])
def test_quantity_accepts_kubernetes_forms_as_written(value):
    spec = QueueSpec.model_validate({"capability": {"cpu": value}})
    assert spec.capability["cpu"] == value and type(spec.capability["cpu"]) is type(value)


@pytest.mark.parametrize("value", ["8 cores", "1.5 Gi", "Gi", "", "1GiB", True, None, [1]])
def test_quantity_rejects_what_the_api_server_would(value):
    with pytest.raises(ValidationError) as err:
        QueueSpec.model_validate({"capability": {"cpu": value}})
    assert "capability.cpu" in str(err.value)


@pytest.mark.parametrize(("field", "value"), [("replicas", "3"), ("replicas", -1), ("replicas", True), ("name", 7)])
def test_scalars_are_not_coerced(field, value):
    # Coercing "3" to 3 would silently change the document on the way back out.
    with pytest.raises(ValidationError):
        TaskSpec.model_validate({field: value})


def test_names_follow_volcano_patterns():
    with pytest.raises(ValidationError):
        TaskSpec.model_validate({"name": "Worker_1"})
    with pytest.raises(ValidationError):
        JobSpec.model_validate({"queue": "ML Training"})
    with pytest.raises(ValidationError):
        JobSpec.model_validate({"tasks": []})  # the CRD's minItems: 1


def test_queue_weight_zero_is_left_for_the_webhook():
    # Mutating webhooks see objects before schema validation; Volcano's rewrites weight 0 to 1.
    assert QueueSpec.model_validate({"weight": 0}).weight == 0
    with pytest.raises(ValidationError):
        QueueSpec.model_validate({"weight": 65536})


# --- durations and timestamps ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", timedelta(0)),
        ("30s", timedelta(seconds=30)),
        ("10m", timedelta(minutes=10)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
        ("-2m", timedelta(minutes=-2)),
        ("1m0.5s", timedelta(seconds=60.5)),
        ("300us", timedelta(microseconds=300)),
        ("5m0s", timedelta(minutes=5)),
    ],
)
def test_parse_duration_follows_go(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "30", "10 m", "1d", "m", "1h-5m", ".s", "ten minutes"])
def test_invalid_durations_are_refused(text):
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)
    with pytest.raises(ValidationError):
        LifecyclePolicy.model_validate({"event": "PodPending", "action": "RestartJob", "timeout": text})


def test_invalid_timestamp_is_refused():
    doc = {"apiVersion": C.BATCH_API_VERSION, "kind": "Job", "status": {"state": {"lastTransitionTime": "yesterday"}}}
    assert "RFC 3339" in _error(doc)


# --- parse_object dispatch -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_version", "kind", "model"),
    [
        ("scheduling.volcano.sh/v1beta1", "Queue", Queue),
        ("scheduling.volcano.sh/v1beta1", "PodGroup", PodGroup),
        ("batch.volcano.sh/v1alpha1", "Job", Job),
        ("bus.volcano.sh/v1alpha1", "Command", Command),
        ("topology.volcano.sh/v1alpha1", "HyperNode", HyperNode),
    ],
)
def test_parse_object_dispatches_on_api_version_and_kind(api_version, kind, model: type[TopLevelModel]):
    doc = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
    if model is HyperNode:
        doc["spec"] = {"tier": 1}
    obj = parse_object(doc)
    assert type(obj) is model and obj.name == "x"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            {"apiVersion": "scheduling.volcano.sh/v1alpha1", "kind": "Queue"},
            "'Queue' in apiVersion 'scheduling.volcano",
        ),
        ({"apiVersion": "batch/v1", "kind": "Job"}, "unknown kind 'Job' in apiVersion 'batch/v1'"),
        ({"apiVersion": "v1", "kind": "Pod"}, "unknown kind 'Pod' in apiVersion 'v1'"),
        ({"kind": "Queue"}, "apiVersion=None, kind='Queue'"),
        ({"apiVersion": "batch.volcano.sh/v1alpha1"}, "kind=None"),
    ],
)
def test_parse_object_names_what_it_cannot_parse(doc, expected):
    with pytest.raises(ValueError, match=re.escape(expected)):
        parse_object(doc)


def test_parse_object_refuses_a_non_mapping():
    with pytest.raises(ValueError, match="got list"):
        parse_object([{"kind": "Queue"}])  # type: ignore[arg-type]


# --- constants -------------------------------------------------------------------------------------------------


def _constant_values() -> dict[str, object]:
    return {name: value for name, value in vars(C).items() if name.isupper()}


def test_constants_cover_every_key_of_reference_table():
    text = shared_path("reference", "volcano-behaviour.md").read_text()
    section = text[text.index("### 1.6") : text.index("\n## 2.")]
    keys = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            keys.update(re.findall(r"`([^`:]+?)(?::[^`]*)?`", first_cell))
    assert len(keys) > 40, "the table was not found"
    values = set(_constant_values().values())
    assert sorted(keys - values) == []


def test_key_constants_are_unique():
    keys = [v for v in _constant_values().values() if isinstance(v, str) and "/" in v]
    duplicates = {k for k in keys if keys.count(k) > 1}
    assert not duplicates


def test_default_queue_names():
    assert (C.DEFAULT_QUEUE, C.ROOT_QUEUE) == ("default", "root")
    assert C.GROUP_NAME_ANNOTATION == "scheduling.k8s.io/group-name"
    assert C.JOB_NAME_KEY == "volcano.sh/job-name"
