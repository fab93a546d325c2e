"""Job status on the wire, the merge patch that writes it, the controller's store, TTL deadlines, queue state."""

import pytest

from controller.cache import Store
from controller.context import job_index
from controller.jobs.state import Counts
from controller.jobs.status import build_status, merge_patch, transition
from controller.jobs.ttl import expires_at
from controller.queues.state import needs_root_parent, next_state, status_patch
from lapilli.api import Action, JobPhase
from lapilli.times import go_duration
from tests.unit.controller.test_controller_builders import pod


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


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (0.25, "250ms"), (1.5, "1.5s"), (90.5, "1m30.5s"),
                                               (3600, "1h0m0s"), (3725, "1h2m5s")])
def test_go_duration(seconds, text):
    assert go_duration(seconds) == text


def test_store_newest_wins_and_deletions_we_made():
    store = Store({"job": job_index})
    fresh = pod("job1", "w", 0)
    fresh["metadata"]["resourceVersion"] = "7"
    stale = pod("job1", "w", 0, "Pending")
    stale["metadata"]["resourceVersion"] = "6"
    store.wrote(fresh)
    store.observe("MODIFIED", stale)  # a late watch event must not roll our own write back
    assert store.get("ns1/job1-w-0") is fresh and store.by_index("job", "ns1/job1") == [fresh]
    store.deleted(fresh, linger=True)
    assert store.deleting(store.get("ns1/job1-w-0"))
    store.observe("DELETED", fresh)
    assert store.get("ns1/job1-w-0") is None and store.by_index("job", "ns1/job1") == []
    store.wrote(fresh)
    store.deleted(fresh, linger=False)
    assert store.get("ns1/job1-w-0") is None
    store.observe("MODIFIED", fresh)  # a late event of the object we dropped stays dropped
    assert store.get("ns1/job1-w-0") is None
    again = pod("job1", "w", 0, uid="new-uid")
    again["metadata"]["resourceVersion"] = "9"
    store.observe("ADDED", again)
    store.observe("DELETED", fresh)  # the old incarnation's deletion does not remove its namesake
    assert store.get("ns1/job1-w-0") is again and not store.deleting(again)


def test_ttl_deadline():
    job = {"spec": {"ttlSecondsAfterFinished": 5},
           "status": {"state": {"phase": "Completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}
    assert expires_at(job) == 1767225600 + 5
    assert expires_at({**job, "spec": {}}) is None
    for phase in ("Aborted", "Running"):
        assert expires_at({**job, "status": {"state": {"phase": phase, "lastTransitionTime": "x"}}}) is None


def test_queue_state_machine():
    assert next_state("", Action.SYNC_QUEUE, 0) == "Open"
    assert next_state("Open", Action.CLOSE_QUEUE, 2) == "Closing"
    assert next_state("Open", Action.CLOSE_QUEUE, 0) == "Closed"
    assert next_state("Closing", Action.SYNC_QUEUE, 1) == "Closing"
    assert next_state("Closing", Action.SYNC_QUEUE, 0) == "Closed"
    assert next_state("Closed", Action.CLOSE_QUEUE, 3) == "Closed"
    assert next_state("Closed", Action.OPEN_QUEUE, 3) == "Open"
    assert next_state("Closed", Action.SYNC_QUEUE, 0) == "Closed"


def test_queue_patch_holds_the_state_only():
    status = {"state": "Open", "allocated": {"cpu": "1"}}
    assert status_patch(status, "Open") is None
    assert status_patch(status, "Closing") == {"state": "Closing"}  # allocated is the scheduler's: not in the patch
    assert status_patch({}, "Open") == {"state": "Open"}
    assert needs_root_parent({"metadata": {"name": "q"}, "spec": {}})
    assert not needs_root_parent({"metadata": {"name": "root"}, "spec": {}})
    assert not needs_root_parent({"metadata": {"name": "q"}, "spec": {"parent": "eng"}})
