"""Job status on the wire and the merge patch that writes it."""

from controller.jobs.state import Counts
from controller.jobs.status import build_status, merge_patch, transition
from lapilli.api import JobPhase


def test_status_omits_zeros_and_keeps_one_condition_per_phase():
    old = {"state": {"phase": "Pending", "lastTransitionTime": "t0"},
           "conditions": [{"status": "Pending", "lastTransitionTime": "t0"},
                          {"status": "Running", "lastTransitionTime": "t1"}], "running": 3}
    counts = Counts(running=0, succeeded=2, tasks={"w": {"Succeeded": 2, "Running": 0}})
    new = build_status(old, counts, min_available=2, version=1, retry_count=0, controlled={"plugin-svc": "svc"})
    assert new["succeeded"] == 2 and "running" not in new and "retryCount" not in new
    assert new["taskStatusCount"] == {"w": {"phase": {"Succeeded": 2}}}
    transition(new, JobPhase.RUNNING, "t2")
    assert new["state"] == {"phase": "Running", "lastTransitionTime": "t2"}
    assert [c["status"] for c in new["conditions"]] == ["Pending", "Running"]
    assert new["conditions"][-1]["lastTransitionTime"] == "t2"


def test_merge_patch_turns_old_into_new():
    old = {"a": 1, "b": {"x": 1, "y": 2}, "c": [1], "gone": True}
    new = {"a": 1, "b": {"x": 1, "y": 3, "z": 0}, "c": [1, 2]}
    assert merge_patch(old, new) == {"b": {"y": 3, "z": 0}, "c": [1, 2], "gone": None}
    assert merge_patch(new, new) == {}
