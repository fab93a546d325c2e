"""Resource groups of `--admission-conf` (webhook.resourcegroups and `/pods/mutate`).

Rows of Volcano's `pkg/webhooks/admission/pods/mutate/mutate_pod_test.go` TestMutatePods (test-1..4, the same
groups and pods; the patch compared op by op, as Volcano writes it), then what the Go test leaves out: a pod's own
nodeSelector, affinity and tolerations meeting a group's, the namespace of the request, a Job pod getting both its
group and its plugins, a malformed file refused with its reason, a reload keeping the last good file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonpatch
import pytest

from tests.service.reviews import job, pod, review, task
from webhook.context import AdmissionContext, AdmissionSettings
from webhook.listers import MemoryJobs
from webhook.pods import mutate_pod
from webhook.resourcegroups import parse_admission_conf, watched
from webhook.review import AdmissionReview

AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}}
CONF = f"""
resourceGroups:
- resourceGroup: management
  object:
    key: namespace
    value: [mng-ns-1, mng-ns-2]
  schedulerName: default-scheduler
  tolerations:
  - {{key: mng-taint-1, operator: Exists, effect: NoSchedule}}
  affinity: '{json.dumps(AFFINITY)}'
  labels:
    volcano.sh/nodetype: management
- resourceGroup: cpu
  object:
    key: annotation
    value: ["volcano.sh/resource-group: cpu"]
  schedulerName: volcano
  labels:
    volcano.sh/nodetype: cpu
- resourceGroup: gpu
  schedulerName: volcano
  labels:
    volcano.sh/nodetype: gpu
"""
GROUPS = parse_admission_conf(CONF)


def run(obj: dict, namespace: str = "default", groups=GROUPS, jobs=None):
    ctx = AdmissionContext(resource_groups=lambda: groups, jobs=jobs or MemoryJobs([]))
    request = review(obj, "CREATE")
    request["request"]["namespace"] = namespace
    return mutate_pod(AdmissionReview.model_validate(request).request, ctx)


def bare(name: str, namespace: str | None = None, annotations: dict | None = None, **spec) -> dict:
    obj = pod(name, annotations=annotations or {})
    if namespace:
        obj["metadata"]["namespace"] = namespace
    obj["spec"].update(spec)
    return obj


def test_1_a_namespace_group_gets_every_part():
    outcome = run(bare("mng-pod", "mng-ns-1", schedulerName="default-scheduler"), "mng-ns-1")
    assert list(outcome.patch) == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "management"}},
        {"op": "add", "path": "/spec/affinity", "value": AFFINITY},
        {"op": "add", "path": "/spec/tolerations",
         "value": [{"key": "mng-taint-1", "operator": "Exists", "effect": "NoSchedule"}]},
        {"op": "add", "path": "/spec/schedulerName", "value": "default-scheduler"},
    ]


def test_2_an_annotation_group():
    outcome = run(bare("cpu-pod", annotations={"volcano.sh/resource-group": "cpu"}))
    assert list(outcome.patch) == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "cpu"}},
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
    ]


def test_3_a_group_without_a_key_matches_its_name_in_the_default_annotation():
    outcome = run(bare("gpu-pod", annotations={"volcano.sh/resource-group": "gpu"}))
    assert list(outcome.patch) == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"volcano.sh/nodetype": "gpu"}},
        {"op": "add", "path": "/spec/schedulerName", "value": "volcano"},
    ]


def test_4_a_pod_of_no_group_is_left_alone():
    assert run(bare("normal-pod")).patch == ()


def test_the_pods_own_settings_meet_the_groups():
    own_affinity = {"podAntiAffinity": {}}
    obj = bare("mng-pod", "mng-ns-2", nodeSelector={"zone": "a", "volcano.sh/nodetype": "x"}, affinity=own_affinity,
               tolerations=[{"key": "own", "operator": "Exists"}])
    out = jsonpatch.apply_patch(obj, list(run(obj, "mng-ns-2").patch))
    assert out["spec"]["nodeSelector"] == {"zone": "a", "volcano.sh/nodetype": "management"}  # the group's wins
    assert out["spec"]["affinity"] == own_affinity  # a pod's own affinity is kept
    assert out["spec"]["tolerations"] == [{"key": "own", "operator": "Exists"},
                                          {"key": "mng-taint-1", "operator": "Exists", "effect": "NoSchedule"}]


def test_a_pod_without_a_namespace_is_in_the_requests():
    obj = bare("mng-pod")
    del obj["metadata"]["namespace"]  # kube-apiserver may leave it out of the object it sends
    assert run(obj, "mng-ns-1").patch
    assert run(obj, "other").patch == ()


def test_a_job_pod_gets_its_group_and_its_plugins():
    jobs = MemoryJobs([job("pt", task("master", 1), task("worker", 2), plugins={"env": [], "pytorch": []})])
    annotations = {"volcano.sh/job-name": "pt", "volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1",
                   "volcano.sh/resource-group": "gpu"}
    obj = bare("pt-worker-1", annotations=annotations)
    out = jsonpatch.apply_patch(obj, list(run(obj, "ns1", jobs=jobs).patch))
    assert out["spec"]["nodeSelector"] == {"volcano.sh/nodetype": "gpu"} and out["spec"]["schedulerName"] == "volcano"
    assert {e["name"] for e in out["spec"]["containers"][0]["env"]} >= {"MASTER_ADDR", "RANK", "WORLD_SIZE"}


@pytest.mark.parametrize(("text", "says"), [
    ("resourceGroups: [\n", "is not YAML"),
    ("", "is empty"),
    ("resourceGroups:\n- resourceGroup: a\n  affinity: '{nodeAffinity'\n", "resourceGroups.0.affinity"),
    ("resourceGroups:\n- resourceGroup: a\n  affinity: '[1]'\n", "is not a JSON object"),
    ("resourceGroups:\n- resourceGroup: a\n  tolerations: [{key: a, colour: red}]\n", "resourceGroups.0.tolerations"),
    ("resourceGroups:\n- resourceGroup: a\n  labels: [a, b]\n", "resourceGroups.0.labels"),
])
def test_a_file_that_cannot_be_used_is_refused_with_where_and_why(text, says):
    with pytest.raises(ValueError) as caught:
        parse_admission_conf(text)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_the_settings_check_refuses_a_bad_file_at_start(tmp_path: Path):
    path = tmp_path / "admission.conf"
    path.write_text("resourceGroups:\n- affinity: 'no'\n")
    problems = AdmissionSettings(admission_conf=path).problems()
    assert len(problems) == 1 and problems[0].startswith(f"--admission-conf {path}: resourceGroups.0.affinity")
    assert AdmissionSettings(admission_conf=tmp_path / "missing").problems() == [
        f"--admission-conf {tmp_path / 'missing'}: No such file or directory"]


def test_a_changed_file_is_read_again_and_a_bad_one_keeps_the_last_good(tmp_path: Path):
    path = tmp_path / "admission.conf"
    path.write_text(CONF)
    groups = watched(path)
    assert [g.resource_group for g in groups().resource_groups] == ["management", "cpu", "gpu"]
    path.write_text("resourceGroups:\n- resourceGroup: only\n")
    os.utime(path, (1, 1))  # a new modification time, whatever the file system's resolution
    assert [g.resource_group for g in groups().resource_groups] == ["only"]
    path.write_text("resourceGroups: [\n")
    os.utime(path, (2, 2))
    assert [g.resource_group for g in groups().resource_groups] == ["only"]
    assert [g.resource_group for g in watched(None)().resource_groups] == []
