"""The simulated kubelet's decisions: pure functions over pod JSON."""

from __future__ import annotations

from typing import Any

import pytest

from assembly.dev.kubelet import PodIPs
from assembly.dev.podsim import (
    finished_patch,
    next_action,
    outcome,
    running_patch,
    slim_pod,
)
from lapilli.times import parse_rfc3339, rfc3339
from lapilli.times import parse_seconds as parse_duration


def pod(phase: str | None = None, annotations: dict[str, str] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations or {}},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "bb"}, {"name": "side", "image": "x"}]},
        "status": {"phase": phase, **status} if phase else {},
    }


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30", 30.0), ("2.5", 2.5), ("30s", 30.0), ("1m30s", 90.0), ("500ms", 0.5), ("1h2m3s", 3723.0), ("0", 0.0),
     (".5s", 0.5)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "10x", "s", "1m junk", "-3"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_rfc3339_round_trip_at_second_precision():
    assert rfc3339(1_800_000_000.9) == "2027-01-15T08:00:00Z"
    assert parse_rfc3339("2027-01-15T08:00:00Z") == 1_800_000_000


def test_outcome_from_annotations():
    assert outcome(pod()).duration is None
    assert outcome(pod(annotations={"sim.lapilli.io/duration": "10s"})) == outcome(
        pod(annotations={"sim.lapilli.io/duration": "10", "sim.lapilli.io/exit-code": "0"})
    )
    failing = outcome(pod(annotations={"sim.lapilli.io/exit-code": "3"}))
    assert (failing.duration, failing.exit_code) == (0.0, 3)  # fails right after it starts
    with pytest.raises(ValueError):
        outcome(pod(annotations={"sim.lapilli.io/exit-code": "three"}))


def test_next_action_over_a_pods_life():
    assert next_action(pod()).kind == "start"
    assert next_action(pod("Pending")).kind == "start"
    assert next_action(pod("Running", startTime="2027-01-15T08:00:00Z")).kind == "none"  # runs until deleted
    timed = pod("Running", {"sim.lapilli.io/duration": "1m"}, startTime="2027-01-15T08:00:00Z")
    assert next_action(timed).kind == "finish" and next_action(timed).at == 1_800_000_060
    assert next_action(timed, started_at=1_800_000_000.75).at == 1_800_000_060.75  # precise local start wins
    assert next_action(pod("Succeeded")).kind == "none" and next_action(pod("Failed")).kind == "none"
    deleting = pod("Succeeded")
    deleting["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    assert next_action(deleting).kind == "delete"


def test_running_patch_carries_uid_ips_and_ready_containers():
    p = pod()
    p["spec"]["initContainers"] = [{"name": "init", "image": "i"}]
    patch = running_patch(p, pod_ip="10.128.0.2", host_ip="172.16.0.1", now=1_800_000_000)
    assert patch["metadata"] == {"uid": "u1"}
    status = patch["status"]
    assert (status["phase"], status["podIP"], status["hostIP"]) == ("Running", "10.128.0.2", "172.16.0.1")
    assert status["startTime"] == "2027-01-15T08:00:00Z"
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "Initialized": "True", "Ready": "True", "ContainersReady": "True", "PodScheduled": "True",
    }
    assert [(c["name"], c["ready"], list(c["state"])) for c in status["containerStatuses"]] == [
        ("main", True, ["running"]), ("side", True, ["running"]),
    ]
    assert status["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


@pytest.mark.parametrize(("code", "phase", "reason"), [(0, "Succeeded", "Completed"), (3, "Failed", "Error")])
def test_finished_patch(code, phase, reason):
    running = pod("Running", startTime="2027-01-15T08:00:00Z")
    status = finished_patch(running, exit_code=code, now=1_800_000_030)["status"]
    assert status["phase"] == phase
    terminated = [c["state"]["terminated"] for c in status["containerStatuses"]]
    assert [(t["exitCode"], t["reason"]) for t in terminated] == [(code, reason)] * 2
    assert terminated[0]["startedAt"] == "2027-01-15T08:00:00Z" and terminated[0]["finishedAt"].endswith("30Z")
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "False"


def test_pod_ips_are_unique_per_node_and_reused_after_release():
    ips = PodIPs()
    first = ips.allocate("n1", "10.128.0.0/24", "ns/a")
    assert first == "10.128.0.2"  # .1 is the node's gateway
    assert ips.allocate("n1", "10.128.0.0/24", "ns/a") == first  # idempotent per pod
    ips.claim("n1", "ns/b", "10.128.0.3")  # seen on a relist
    assert ips.allocate("n1", "10.128.0.0/24", "ns/c") == "10.128.0.4"
    assert ips.allocate("n2", "10.128.1.0/24", "ns/d") == "10.128.1.2"
    ips.release("ns/a")
    assert ips.allocate("n1", "10.128.0.0/24", "ns/e") == "10.128.0.5"  # the cursor moves on first
    taken = {ips.allocate("n1", "10.128.0.0/24", f"ns/x{i}") for i in range(250)}
    assert "10.128.0.2" in taken and len(taken) == 250  # then wraps round to what was freed
    with pytest.raises(RuntimeError):
        ips.allocate("n1", "10.128.0.0/24", "ns/one-too-many")


def test_slim_pod_keeps_everything_the_kubelet_reads():
    full = pod("Running", {"sim.lapilli.io/duration": "1m", "unrelated": "x" * 1000}, startTime="2027-01-15T08:00:00Z",
               podIP="10.128.0.9", conditions=[{"type": "Ready", "status": "True"}], qosClass="BestEffort")
    full["metadata"] |= {"resourceVersion": "42", "managedFields": [{"manager": "kubectl"}], "labels": {"a": "b"}}
    full["spec"]["containers"][0] |= {"env": [{"name": "X", "value": "1"}], "resources": {"requests": {"cpu": "1"}}}
    slim = slim_pod(full)
    assert slim["metadata"] == {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
                                "annotations": {"sim.lapilli.io/duration": "1m"}}
    assert slim["status"] == {"phase": "Running", "podIP": "10.128.0.9", "startTime": "2027-01-15T08:00:00Z"}
    assert next_action(slim) == next_action(full)
    assert finished_patch(slim, exit_code=0, now=1.8e9) == finished_patch(full, exit_code=0, now=1.8e9)
    assert running_patch(slim, pod_ip="i", host_ip="h", now=1.8e9) == running_patch(full, pod_ip="i", host_ip="h",
                                                                                      now=1.8e9)
    deleting = {**full, "metadata": {**full["metadata"], "deletionTimestamp": "2027-01-15T08:00:00Z"}}
    assert next_action(slim_pod(deleting)).kind == "delete"
