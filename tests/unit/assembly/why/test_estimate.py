"""The start-time estimate: the scheduler's engine replayed forward from the cluster as it is (assembly.sim.forward),
with jobs' ends from their expected-duration annotation, activeDeadlineSeconds or their queue's finished jobs."""

from __future__ import annotations

from typing import Any

import pytest

from assembly.sim.forward import forward
from assembly.why.estimate import Estimate, about, estimates, history, live_jobs, run_time
from extender.engine.run import parse_scheduler_conf
from lapilli.meta import key_of
from lapilli.times import rfc3339
from tests.unit.extender.engine.builders import node, queue

NOW = 1_790_000_000.0
CONF = parse_scheduler_conf(None)
GPU = "nvidia.com/gpu"


def vcjob(name: str, gpus: int, *, phase: str = "Pending", annotations: dict[str, str] | None = None,
          started: float | None = None, deadline: int | None = None, queue_name: str = "default",
          created: float = NOW - 3600) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "x", "resources": {
        "requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}}]}}
    if deadline is not None:
        template["spec"]["activeDeadlineSeconds"] = deadline
    conditions = [{"status": "Pending", "lastTransitionTime": rfc3339(created)}]
    if started is not None:
        conditions.append({"status": "Running", "lastTransitionTime": rfc3339(started)})
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "creationTimestamp": rfc3339(created),
                         "annotations": annotations or {}},
            "spec": {"schedulerName": "volcano", "queue": queue_name, "minAvailable": gpus,
                     "tasks": [{"name": "worker", "replicas": gpus, "template": template}]},
            "status": {"state": {"phase": phase}, "conditions": conditions}}


def running_pods(job: dict[str, Any], node_name: str) -> list[dict[str, Any]]:
    name = job["metadata"]["name"]
    spec = job["spec"]["tasks"][0]["template"]["spec"]
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{name}-worker-{i}", "namespace": "ml", "uid": f"{name}-{i}",
                          "ownerReferences": [{"kind": "Job", "name": name, "uid": job["metadata"]["uid"]}],
                          "annotations": {"scheduling.k8s.io/group-name": name}},
             "spec": {**spec, "nodeName": node_name},
             "status": {"phase": "Running", "startTime": rfc3339(NOW - 1200)}}
            for i in range(job["spec"]["minAvailable"])]


def view(*jobs: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    objects: dict[str, dict[str, dict[str, Any]]] = {
        "Node": {"n1": node({"name": "n1", "alloc": {"cpu": "16", "memory": "64Gi", GPU: "2"}})},
        "Queue": {"default": queue({"name": "default"})}, "PriorityClass": {}, "Pod": {}}
    for pod in pods:
        objects["Pod"][key_of(pod)] = pod
    return objects


def waiting_behind_llama() -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, dict[str, Any]]]]:
    """ml/llama-70b runs 1h from 20 min ago on both GPUs of n1 and ml/next waits for them: the Jobs, and the
    cluster's objects with each Job's PodGroup (Running, Inqueue) as the dashboard reads them."""
    llama = vcjob("llama-70b", 2, phase="Running", annotations={"volcano.sh/expected-duration": "1h"},
                  started=NOW - 1200)
    nxt = vcjob("next", 2, created=NOW - 7200)
    objects = view(llama, nxt, pods=running_pods(llama, "n1"))
    for job, phase in ((llama, "Running"), (nxt, "Inqueue")):
        name = job["metadata"]["name"]
        objects.setdefault("PodGroup", {})[f"ml/{name}"] = {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml", "creationTimestamp": job["metadata"]["creationTimestamp"],
                         "ownerReferences": [{"kind": "Job", "name": name, "uid": job["metadata"]["uid"]}]},
            "spec": {"queue": "default", "minMember": 2, "minResources": {"cpu": "2", "nvidia.com/gpu": "2"}},
            "status": {"phase": phase}}
    return llama, nxt, objects


def test_a_job_waiting_behind_a_running_job_with_an_expected_duration() -> None:
    llama = vcjob("llama-70b", 2, phase="Running", annotations={"volcano.sh/expected-duration": "1h"},
                  started=NOW - 1200)
    nxt = vcjob("next", 2, created=NOW - 7200)  # older than the running job: only its room holds it back
    got = estimates(view(llama, nxt, pods=running_pods(llama, "n1")), [llama, nxt], CONF, NOW)
    mine = got["ml/next"]
    assert mine.seconds == pytest.approx(2400)
    assert mine.after == "ml/llama-70b"
    assert mine.text() == ("expected to start in about 40 min (when ml/llama-70b ends, by its "
                           "volcano.sh/expected-duration)")
    assert got["ml/llama-70b"].seconds == 0  # running now: it starts at once in the replay


def test_unknown_when_nothing_says_when_the_running_job_ends() -> None:
    llama = vcjob("llama-70b", 2, phase="Running", started=NOW - 1200)
    nxt = vcjob("next", 2)
    mine = estimates(view(llama, nxt, pods=running_pods(llama, "n1")), [llama, nxt], CONF, NOW)["ml/next"]
    assert mine.seconds is None and mine.unknown == ["ml/llama-70b"]
    assert mine.text().startswith("expected start: unknown (when ml/llama-70b will end is not known")
    assert mine.to_json()["seconds"] is None


def test_deadline_and_history_when_there_is_no_annotation() -> None:
    assert run_time(vcjob("a", 1, deadline=7200), {}).seconds == 7200
    done = []
    for i, hours in enumerate((1, 2, 4)):
        job = vcjob(f"old-{i}", 1, phase="Completed", started=NOW - 86400)
        job["status"]["conditions"].append({"status": "Completed",
                                            "lastTransitionTime": rfc3339(NOW - 86400 + hours * 3600)})
        done.append(job)
    past = history(done)
    guess = run_time(vcjob("b", 1), past)
    assert guess.seconds == 7200 and guess.basis == "the median of 3 finished jobs of namespace ml in queue default"
    assert run_time(vcjob("c", 1), history(done[:2])).seconds is None  # two are not enough
    assert run_time(vcjob("d", 1, annotations={"volcano.sh/expected-duration": "soon"}), {}).seconds is None


def test_words() -> None:
    assert about(2400) == "about 40 min" and about(60) == "about a minute" and about(5 * 3600) == "about 5.0 h"
    assert about(3 * 86400) == "about 3.0 days"
    assert Estimate(0).text() == "expected to start now"


def test_a_job_the_replay_cannot_read_is_left_out_and_the_others_are_estimated() -> None:
    llama = vcjob("llama-70b", 2, phase="Running", annotations={"volcano.sh/expected-duration": "1h"},
                  started=NOW - 1200)
    nxt = vcjob("next", 2, created=NOW - 7200)
    lost = vcjob("lost", 1, queue_name="no-such-queue")
    objects = view(llama, nxt, lost, pods=running_pods(llama, "n1"))
    live, _ = live_jobs([llama, nxt, lost], list(objects["Pod"].values()), NOW)
    forecast = forward(list(objects["Node"].values()), list(objects["Queue"].values()), [], live,
                       list(objects["Pod"].values()), CONF, NOW)
    assert list(forecast.skipped) == ["ml/lost"] and "no-such-queue" in forecast.skipped["ml/lost"]
    assert forecast.started["ml/next"] == pytest.approx(2400)
    got = estimates(objects, [llama, nxt, lost], CONF, NOW)
    assert got["ml/lost"].text().startswith("expected start: unknown (the scheduler's replay cannot read this Job: ")
    assert "no-such-queue" in got["ml/lost"].text() and got["ml/next"].seconds == pytest.approx(2400)
