"""Lifecycle policies (reference §3.1 applyPolicies) and the pod-event classifier that feeds them."""

from controller.jobs.policies import apply_policies
from controller.jobs.requests import Request, pod_request, task_completed, task_failed
from lapilli.api import Action, Event
from tests.unit.controller.builders import UID, job, job_doc, pod, task


def req(event=None, **kw):
    return Request("ns1", "job1", job_uid=UID, event=event, **kw)


POLICY_JOB = job(
    task("master", 1, policies=[{"event": "TaskCompleted", "action": "CompleteJob"},
                                {"exitCode": 137, "action": "RestartPod"}]),
    task("worker", 2, policies=[{"event": "PodPending", "action": "RestartPod", "timeout": "5m"}]),
    policies=[{"event": "PodEvicted", "action": "RestartJob"}, {"events": ["PodFailed", "Unknown"],
                                                                  "action": "AbortJob"}],
)


def test_command_action_wins():
    assert apply_policies(POLICY_JOB, req(Event.COMMAND_ISSUED, action=Action.ABORT_JOB)).action == Action.ABORT_JOB


def test_internal_events_and_plain_requests_sync():
    for event in (Event.OUT_OF_SYNC, Event.COMMAND_ISSUED, Event.POD_RUNNING, None):
        assert apply_policies(POLICY_JOB, req(event, task="master")).action == Action.SYNC_JOB


def test_task_policies_come_before_job_policies():
    decision = apply_policies(POLICY_JOB, req(Event.TASK_COMPLETED, task="master"))
    assert (decision.action, decision.delay_s, decision.policy_matched) == (Action.COMPLETE_JOB, 0.0, True)
    assert apply_policies(POLICY_JOB, req(Event.POD_EVICTED, task="master")).action == Action.RESTART_JOB
    assert apply_policies(POLICY_JOB, req(Event.JOB_UNKNOWN)).action == Action.ABORT_JOB


def test_exit_code_policy():
    assert apply_policies(POLICY_JOB, req(Event.POD_FAILED, task="master", exit_code=137)).action == Action.RESTART_POD
    assert apply_policies(POLICY_JOB, req(Event.POD_FAILED, task="master", exit_code=1)).action == Action.ABORT_JOB


def test_pod_pending_only_matches_a_policy_with_a_timeout():
    decision = apply_policies(POLICY_JOB, req(Event.POD_PENDING, task="worker"))
    assert (decision.action, decision.delay_s) == (Action.RESTART_POD, 300.0)
    any_event = job(policies=[{"event": "*", "action": "RestartJob"}])
    assert apply_policies(any_event, req(Event.POD_PENDING, task="worker")).action == Action.SYNC_JOB
    assert apply_policies(any_event, req(Event.POD_FAILED, task="worker")).action == Action.RESTART_JOB


def test_requests_of_an_older_incarnation_only_sync():
    bumped = job(policies=[{"event": "PodEvicted", "action": "RestartJob"}], status={"version": 2})
    assert apply_policies(bumped, req(Event.POD_EVICTED, job_version=1)).action == Action.SYNC_JOB
    assert apply_policies(bumped, req(Event.POD_EVICTED, job_version=2)).action == Action.RESTART_JOB
    other = Request("ns1", "job1", job_uid="someone-else", event=Event.POD_EVICTED, job_version=2)
    assert apply_policies(bumped, other).action == Action.SYNC_JOB


def classify(event_type, new, old=None, *, siblings=(), first=True, doc=None):
    return pod_request(event_type, new, old, job=doc or job_doc(task("worker", 2)), task_pods=siblings,
                       first_deletion=first)


def test_pods_not_of_a_volcano_job_are_ignored():
    bare = pod("job1", "worker", 0)
    bare["metadata"]["ownerReferences"] = []
    assert classify("ADDED", bare) is None
    no_version = pod("job1", "worker", 0)
    del no_version["metadata"]["annotations"]["volcano.sh/job-version"]
    assert classify("ADDED", no_version) is None


def test_add_is_pod_pending_and_carries_identity():
    r = classify("ADDED", pod("job1", "worker", 1, "Pending", version=3))
    assert (r.event, r.task, r.pod_name, r.job_version, r.job_uid) == (Event.POD_PENDING, "worker", "job1-worker-1",
                                                                     3, UID)


def test_failure_carries_the_exit_code():
    old, new = pod("job1", "worker", 0, "Running"), pod("job1", "worker", 0, "Failed")
    new["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 137}}
    r = classify("MODIFIED", new, old)
    assert (r.event, r.exit_code) == (Event.POD_FAILED, 137)
    assert classify("MODIFIED", new, new).event == Event.OUT_OF_SYNC


def test_task_completed_only_when_every_replica_succeeded():
    old, new = pod("job1", "worker", 1, "Running"), pod("job1", "worker", 1, "Succeeded")
    done = [pod("job1", "worker", 0, "Succeeded"), new]
    assert classify("MODIFIED", new, old, siblings=done).event == Event.TASK_COMPLETED
    half = [pod("job1", "worker", 0, "Running"), new]
    assert classify("MODIFIED", new, old, siblings=half).event == Event.OUT_OF_SYNC


def test_running_again_and_task_failed():
    assert classify("MODIFIED", pod("job1", "worker", 0), pod("job1", "worker", 0, "Pending")).event == (
        Event.POD_RUNNING)
    crashing = pod("job1", "worker", 0)
    crashing["status"]["containerStatuses"][0]["restartCount"] = 3
    assert classify("MODIFIED", crashing, pod("job1", "worker", 0), siblings=[crashing]).event == Event.TASK_FAILED
    doc = job_doc(task("worker", 1, maxRetry=5))
    assert not task_failed(doc, "worker", [crashing])
    assert task_failed(job_doc(task("worker", 1)), "worker", [crashing])  # maxRetry unset means 3
    assert not task_completed(doc, "worker", [])


def test_deletion_is_an_eviction_once_unless_the_controller_marked_it():
    evicted = pod("job1", "worker", 0, deletionTimestamp="2026-01-01T00:00:00Z")
    assert classify("MODIFIED", evicted, pod("job1", "worker", 0)).event == Event.POD_EVICTED
    assert classify("DELETED", evicted, evicted, first=False).event == Event.OUT_OF_SYNC
    assert classify("DELETED", pod("job1", "worker", 0), pod("job1", "worker", 0)).event == Event.POD_EVICTED
    ours = pod("job1", "worker", 0, notes={"volcano.sh/controller-out-of-sync": "true"})
    assert classify("DELETED", ours, ours).event == Event.OUT_OF_SYNC
    assert classify("MODIFIED", ours, pod("job1", "worker", 0, "Pending")).event == Event.OUT_OF_SYNC
