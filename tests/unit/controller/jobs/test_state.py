"""The Job state machine (reference §3.5): the step each action takes in each phase, and the rules that pick
the next phase from the pod counts."""

import pytest

from controller.jobs.state import NONE, SOFT, Counts, Op, Rule, next_phase, step_for
from lapilli.api import Action, JobPhase
from tests.unit.controller.builders import job, task

P = JobPhase


@pytest.mark.parametrize("phase", [None, P.PENDING, P.RUNNING])
@pytest.mark.parametrize(("action", "op", "target", "retain", "retry"), [
    (Action.RESTART_JOB, Op.KILL_JOB, P.RESTARTING, NONE, True),
    (Action.ABORT_JOB, Op.KILL_JOB, P.ABORTING, SOFT, False),
    (Action.COMPLETE_JOB, Op.KILL_JOB, P.COMPLETING, SOFT, False),
    (Action.TERMINATE_JOB, Op.KILL_JOB, P.TERMINATING, SOFT, False),
    (Action.RESTART_TASK, Op.KILL_TARGET, P.RESTARTING, SOFT, True),
    (Action.RESTART_POD, Op.KILL_TARGET, P.RESTARTING, SOFT, True),
    (Action.RESTART_PARTITION, Op.KILL_TARGET, P.RESTARTING, SOFT, True),
])
def test_active_phases_kill_on_user_actions(phase, action, op, target, retain, retry):
    step = step_for(phase, action)
    assert (step.op, step.rule, step.target, step.retry) == (op, Rule.SET, target, retry)
    if op == Op.KILL_JOB:
        assert step.retain == retain


def test_active_phases_sync_otherwise():
    assert step_for(P.PENDING, Action.SYNC_JOB).rule == Rule.PENDING
    assert step_for(None, Action.RESUME_JOB).rule == Rule.PENDING
    assert step_for(P.RUNNING, Action.SYNC_JOB).rule == Rule.RUNNING
    assert step_for(P.RUNNING, Action.SYNC_JOB).op == Op.SYNC


def test_restarting():
    assert (step_for(P.RESTARTING, Action.SYNC_JOB).op, step_for(P.RESTARTING, Action.SYNC_JOB).rule) == (
        Op.SYNC, Rule.RESTARTING)
    assert step_for(P.RESTARTING, Action.RESTART_POD).op == Op.KILL_TARGET
    other = step_for(P.RESTARTING, Action.RESTART_JOB)
    assert (other.op, other.rule, other.retain, other.retry) == (Op.KILL_JOB, Rule.RESTARTING, NONE, False)


@pytest.mark.parametrize("phase", [P.ABORTING, P.ABORTED])
def test_resume_from_aborting_or_aborted_restarts_keeping_finished_pods(phase):
    step = step_for(phase, Action.RESUME_JOB)
    assert (step.op, step.target, step.retain, step.retry) == (Op.KILL_JOB, P.RESTARTING, SOFT, True)


@pytest.mark.parametrize(("phase", "final"), [(P.ABORTING, P.ABORTED), (P.COMPLETING, P.COMPLETED),
                                              (P.TERMINATING, P.TERMINATED)])
def test_draining_phases_end_when_nothing_lives(phase, final):
    step = step_for(phase, Action.SYNC_JOB)
    assert (step.op, step.rule, step.target) == (Op.KILL_JOB, Rule.DRAIN, final)
    j = job()
    assert next_phase(step, j, Counts(terminating=1), 0, 2) is None
    assert next_phase(step, j, Counts(running=1), 0, 2) is None
    assert next_phase(step, j, Counts(succeeded=2), 0, 2) == final


@pytest.mark.parametrize("phase", [P.ABORTED, P.COMPLETED, P.TERMINATED, P.FAILED])
def test_finished_phases_only_clean_up(phase):
    step = step_for(phase, Action.RESTART_JOB if phase != P.ABORTED else Action.SYNC_JOB)
    assert (step.op, step.rule, step.retain) == (Op.KILL_JOB, Rule.KEEP, SOFT)


def test_pending_becomes_running_once_enough_pods_ran():
    step, j = step_for(P.PENDING, Action.SYNC_JOB), job(task("w", 3), minAvailable=2)
    assert next_phase(step, j, Counts(running=1, pending=2), 0, 2) is None
    assert next_phase(step, j, Counts(running=1, failed=1, pending=1), 0, 2) == P.RUNNING


def _running(j, **counts):
    return next_phase(step_for(P.RUNNING, Action.SYNC_JOB), j, Counts(**counts), 0, j.spec.min_available)


def test_running_completes_when_all_finished_and_enough_succeeded():
    j = job(task("w", 3), minAvailable=2)
    assert _running(j, succeeded=2, failed=1) == P.COMPLETED
    assert _running(j, succeeded=1, failed=2) == P.FAILED
    assert _running(j, succeeded=2, running=1) is None


def test_running_min_success_completes_early_and_fails_short():
    j = job(task("w", 4), minAvailable=1, minSuccess=2)
    assert _running(j, succeeded=2, running=2) == P.COMPLETED
    assert _running(j, succeeded=1, failed=3) == P.FAILED


def test_running_fails_when_a_task_with_min_available_did_not_succeed_enough():
    j = job(task("ps", 1, minAvailable=1), task("w", 2, minAvailable=1), minAvailable=2)
    tasks = {"ps": {"Failed": 1}, "w": {"Succeeded": 2}}
    assert _running(j, succeeded=2, failed=1, tasks=tasks) == P.FAILED
    tasks = {"ps": {"Succeeded": 1}, "w": {"Succeeded": 1, "Failed": 1}}
    assert _running(j, succeeded=2, failed=1, tasks=tasks) == P.COMPLETED


def test_running_goes_back_to_pending_when_too_many_pods_wait():
    j = job(task("w", 3), minAvailable=3)
    assert _running(j, running=2, pending=1) == P.PENDING
    j = job(task("w", 3, minAvailable=2), minAvailable=2)
    assert _running(j, running=2, pending=1) is None


def test_running_keeps_its_phase_when_scaled_to_zero():
    assert _running(job(task("w", 0), minAvailable=0)) is None


def test_restarting_fails_past_max_retry_else_waits_for_pods_to_go():
    j = job(task("w", 3), minAvailable=3, maxRetry=2)
    step = step_for(P.RESTARTING, Action.SYNC_JOB)
    assert next_phase(step, j, Counts(), 2, 3) == P.FAILED
    assert next_phase(step, j, Counts(terminating=1), 1, 3) is None
    assert next_phase(step, j, Counts(), 1, 3) == P.PENDING
