"""Self-healing gangs in the Job controller (controller/jobs/heal.py and its wiring in controller.py): a lost member's
PodEvicted/PodFailed policy waits for the gang to regain it when `--gang-heal-timeout` is set, never when the
scheduler evicted the pod, and a loss no policy acts on is reported with a GangDegraded Event while the gang is still
short once the window has passed."""

from __future__ import annotations

import asyncio
from typing import Any

from controller.context import Context
from controller.jobs.controller import JobController
from controller.jobs.heal import heal_first, short
from controller.jobs.policies import Decision, apply_policies
from controller.jobs.requests import Request, pod_request
from controller.metrics import ControllerMetrics
from controller.settings import ControllerSettings
from lapilli.api import Action, Event
from lapilli.api.constants import EVICTED_BY_ANNOTATION
from tests.unit.controller.builders import UID, job, job_doc, pod, task

RESTART_ON_EVICTION = [{"event": "PodEvicted", "action": "RestartJob"}]


def bound(index: int, phase: str = "Running", **meta: Any) -> dict[str, Any]:
    doc = pod("job1", "worker", index, phase, **meta)
    doc["spec"]["nodeName"] = f"n{index}"
    return doc


def lost(**kw: Any) -> Request:
    return Request("ns1", "job1", job_uid=UID, task="worker", pod_name="job1-worker-1", pod_uid="u1",
                   event=Event.POD_EVICTED, **kw)


def test_a_gang_holding_some_members_below_its_minimum_is_short() -> None:
    gang = job(task("worker", 3))
    assert short(gang, [bound(0), bound(1)]) == (2, 3)
    assert short(gang, [bound(0), bound(1), bound(2)]) is None  # whole
    assert short(gang, []) is None  # nothing left to heal: the policy acts (a whole-gang eviction)
    deleting = bound(1, deletionTimestamp="2026-01-01T00:00:00Z")
    assert short(gang, [bound(0), deleting, bound(2, "Failed")]) == (1, 3)  # leaving or ended: not holding
    assert short(gang, [bound(0), bound(1), bound(2, version=1)]) == (2, 3)  # another incarnation's: not a member


def test_an_immediate_policy_waits_for_the_heal_window_only_when_set_and_the_gang_holds_members() -> None:
    at_once = apply_policies(job(task("worker", 3), policies=RESTART_ON_EVICTION), lost())
    assert (at_once.action, at_once.delay_s) == (Action.RESTART_JOB, 0.0)
    waits = heal_first(at_once, lost(), (2, 3), 30.0)
    assert (waits.action, waits.delay_s, waits.policy_matched) == (Action.RESTART_JOB, 30.0, True)
    assert heal_first(at_once, lost(), (2, 3), 0.0) is at_once  # 0: Volcano's timing
    assert heal_first(at_once, lost(), None, 30.0) is at_once  # whole, or nothing left
    assert heal_first(at_once, lost(scheduler_evicted=True), (2, 3), 30.0) is at_once  # the scheduler decided
    assert heal_first(at_once, lost(delayed=True), (2, 3), 30.0) is at_once  # its window has passed
    own = Decision(Action.RESTART_JOB, 600.0, True)
    assert heal_first(own, lost(), (2, 3), 30.0) is own  # the policy's own timeout is its heal window
    failed = Request("ns1", "job1", job_uid=UID, pod_name="job1-worker-1", event=Event.POD_FAILED)
    assert heal_first(at_once, failed, (2, 3), 30.0).delay_s == 30.0


def test_a_pod_the_scheduler_evicted_is_marked_in_its_request() -> None:
    doc = job_doc(task("worker", 2))
    marked = bound(1, notes={EVICTED_BY_ANNOTATION: "gangpreempt: gang ns1/job1 evicted whole"})
    req = pod_request("DELETED", marked, marked, job=doc, task_pods=[], first_deletion=True)
    assert req is not None and req.event == Event.POD_EVICTED and req.scheduler_evicted
    plain = pod_request("DELETED", bound(1), bound(1), job=doc, task_pods=[], first_deletion=True)
    assert plain is not None and not plain.scheduler_evicted


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def record(self, obj: Any, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


def controller(timeout_s: float, *pods: dict[str, Any], **spec: Any) -> tuple[JobController, Recorder]:
    recorder = Recorder()
    ctx = Context(None, ControllerSettings(gang_heal_timeout_s=timeout_s), recorder,  # type: ignore[arg-type]
                  ControllerMetrics())
    ctx.jobs.observe("ADDED", job_doc(task("worker", 3), **spec))
    for doc in pods:
        ctx.pods.observe("ADDED", doc)
    return JobController(ctx), recorder


async def test_a_loss_no_policy_acts_on_is_reported_once_the_window_has_passed_if_still_short() -> None:
    jobs, recorder = controller(0.05, bound(0), bound(2))
    gang = jobs._job("ns1/job1")
    assert gang is not None
    decision = jobs._heal_first("ns1/job1", gang[1], lost(), apply_policies(gang[1], lost()))
    assert decision.action == Action.SYNC_JOB  # Volcano's: the controller makes the member again
    assert len(jobs.heals) == 1
    await asyncio.sleep(0.15)
    [(type_, reason, message)] = recorder.events
    assert (type_, reason) == ("Warning", "GangDegraded")
    assert message.startswith("gang below minAvailable for 0.05s: 2 of 3 pods hold their place since pod "
                              "job1-worker-1 was evicted or deleted; no lifecycle policy of the Job acts on PodEvicted")


async def test_a_gang_that_regains_its_member_in_time_gets_no_event() -> None:
    jobs, recorder = controller(0.05, bound(0), bound(2))
    gang = jobs._job("ns1/job1")
    assert gang is not None
    jobs._heal_first("ns1/job1", gang[1], lost(), apply_policies(gang[1], lost()))
    again = Request("ns1", "job1", job_uid=UID, task="worker", pod_name="job1-worker-1", pod_uid="u1-again",
                    event=Event.POD_RUNNING)
    jobs.heals.observe(again)  # the member made in its place runs
    await asyncio.sleep(0.15)
    assert recorder.events == [] and len(jobs.heals) == 0


async def test_a_gang_placed_whole_again_by_the_deadline_gets_no_event() -> None:
    jobs, recorder = controller(0.05, bound(0), bound(2))
    gang = jobs._job("ns1/job1")
    assert gang is not None
    jobs._heal_first("ns1/job1", gang[1], lost(), apply_policies(gang[1], lost()))
    jobs.ctx.pods.observe("ADDED", bound(1, uid="u1-again"))
    await asyncio.sleep(0.15)
    assert recorder.events == []


def test_with_a_policy_the_loss_is_not_watched_the_policy_is_held() -> None:
    jobs, _ = controller(30.0, bound(0), bound(2), policies=RESTART_ON_EVICTION)
    gang = jobs._job("ns1/job1")
    assert gang is not None
    decision = jobs._heal_first("ns1/job1", gang[1], lost(), apply_policies(gang[1], lost()))
    assert (decision.action, decision.delay_s) == (Action.RESTART_JOB, 30.0)
    assert len(jobs.heals) == 0
