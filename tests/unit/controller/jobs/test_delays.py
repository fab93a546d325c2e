"""Delayed policy actions (reference §3.1): held back, fired once, cancelled when moot."""

import asyncio

from controller.jobs.delays import DelayedActions
from controller.jobs.requests import Request
from lapilli.api import Action, Event


def req(event, pod="job1-w-0", uid="u0", task="w"):
    return Request("ns", "job1", task=task, pod_name=pod, pod_uid=uid, event=event)


async def test_fires_once_with_the_action_set_and_ignores_repeats():
    fired: list[Request] = []
    delays = DelayedActions(fired.append)
    assert delays.schedule(req(Event.POD_PENDING), Action.RESTART_POD, 0.01)
    assert not delays.schedule(req(Event.POD_PENDING), Action.RESTART_POD, 0.01)
    await asyncio.sleep(0.05)
    assert [(r.action, r.delayed, r.pod_name) for r in fired] == [(Action.RESTART_POD, True, "job1-w-0")]
    assert len(delays) == 0


async def test_pending_delay_cancelled_by_another_event_of_the_pod():
    fired: list[Request] = []
    delays = DelayedActions(fired.append)
    delays.schedule(req(Event.POD_PENDING), Action.RESTART_POD, 0.02)
    delays.observe(req(Event.POD_PENDING))  # still pending: keeps waiting
    assert len(delays) == 1
    delays.observe(req(Event.POD_RUNNING, uid="other"))  # another pod: no effect
    delays.observe(req(Event.POD_RUNNING))
    await asyncio.sleep(0.05)
    assert fired == [] and len(delays) == 0


async def test_failure_delay_cancelled_when_the_pod_runs_again_and_by_execution():
    fired: list[Request] = []
    delays = DelayedActions(fired.append)
    delays.schedule(req(Event.POD_FAILED), Action.RESTART_JOB, 1)
    delays.observe(req(Event.OUT_OF_SYNC))
    assert len(delays) == 1
    delays.observe(req(Event.POD_RUNNING))
    assert len(delays) == 0
    delays.schedule(req(Event.POD_EVICTED, pod="job1-w-1", uid="u1"), Action.RESTART_TASK, 1)
    delays.schedule(req(Event.POD_EVICTED, pod="job1-x-0", uid="u2", task="x"), Action.RESTART_TASK, 1)
    delays.executed(req(Event.POD_FAILED, pod="job1-w-2", uid="u3"), Action.RESTART_TASK)
    assert len(delays) == 1  # the other task's restart still stands
    delays.forget_job("ns/job1")
    assert len(delays) == 0


async def test_failure_delay_cancelled_when_the_pod_made_in_its_place_runs():
    # The Job controller makes a lost member again under its name, with a new uid: once that one runs, the gang has
    # healed and the held RestartJob is moot (Volcano's CleanPodDelayActionsIfNeed matches the pod name).
    fired: list[Request] = []
    delays = DelayedActions(fired.append)
    delays.schedule(req(Event.POD_EVICTED), Action.RESTART_JOB, 0.05)
    delays.observe(req(Event.POD_RUNNING, pod="job1-w-1", uid="u1"))  # another member: no effect
    assert len(delays) == 1
    delays.observe(req(Event.POD_RUNNING, uid="u0-again"))
    await asyncio.sleep(0.1)
    assert fired == [] and len(delays) == 0
