"""How often the extender's sessions write Queue status and record PodGroup events (extender/service/pacing.py),
and which event a PodGroup gets (Volcano's RecordJobStatusEvent, extender/service/status.py)."""

from __future__ import annotations

import itertools

import pytest

from extender.service.pacing import ECHO_WAIT_S, EVENT_BURST, EVENT_REPEAT_S, PERIOD_S, Pacer
from extender.service.status import podgroup_event, unschedulable_message

ALLOCATED = {"allocated": {"cpu": "2"}}


@pytest.mark.parametrize(
    ("phase", "updated", "expect"),
    [
        ("Pending", False, ("Warning", "Unschedulable")),
        ("Inqueue", False, ("Warning", "Unschedulable")),
        ("Unknown", True, ("Warning", "Unschedulable")),
        ("Running", True, ("Normal", "Scheduled")),
        ("Completed", True, ("Normal", "Scheduled")),
        ("Running", False, None),
    ],
)
def test_podgroup_event_follows_volcano(phase, updated, expect):
    assert podgroup_event(phase, updated) == expect


def test_unschedulable_message_reads_like_volcano():
    assert unschedulable_message(3, 4, "pod group is not ready, 1 Bound, 3 Pending, 4 minAvailable") == (
        "3/4 tasks in gang unschedulable: pod group is not ready, 1 Bound, 3 Pending, 4 minAvailable"
    )


def test_queue_allocated_at_most_once_a_period_and_the_latest_goes_out_after_it():
    pacer = Pacer()
    assert pacer.queue_due("q", ALLOCATED, 10.0)
    assert not pacer.queue_due("q", ALLOCATED, 10.2)
    assert not pacer.queue_due("q", ALLOCATED, 10.0 + PERIOD_S - 0.01)
    assert pacer.queue_due("other", ALLOCATED, 10.3), "each queue has its own period"
    assert pacer.queue_due("q", ALLOCATED, 10.0 + PERIOD_S)
    assert not pacer.queue_due("q", ALLOCATED, 10.0 + PERIOD_S + 0.5), "the period restarts at the last write"


def test_queue_state_goes_out_at_once():
    pacer = Pacer()
    assert pacer.queue_due("q", ALLOCATED, 10.0)
    assert pacer.queue_due("q", {"state": "Open", **ALLOCATED}, 10.1)
    assert not pacer.queue_due("q", ALLOCATED, 10.2), "a state write counts as the queue's write"


def test_an_unchanged_event_repeats_only_after_the_repeat_interval():
    pacer = Pacer()
    assert pacer.event_due("ns/pg", "Unschedulable", 0.0, lambda: "4/4 stuck") == "4/4 stuck"
    for t in (0.2, 1.0, 5.0, EVENT_REPEAT_S - 0.1):
        assert pacer.event_due("ns/pg", "Unschedulable", t, lambda: "4/4 stuck") is None
    assert pacer.event_due("ns/pg", "Unschedulable", EVENT_REPEAT_S, lambda: "4/4 stuck") == "4/4 stuck"
    assert pacer.event_due("ns/pg", "Unschedulable", EVENT_REPEAT_S + 1, lambda: "4/4 stuck") is None


def test_a_changed_message_goes_out_after_a_period_and_other_reasons_and_groups_are_apart():
    pacer = Pacer()
    assert pacer.event_due("ns/pg", "Unschedulable", 0.0, lambda: "1/1")
    assert pacer.event_due("ns/pg", "Unschedulable", 0.5, lambda: "2/2") is None, "within one period"
    assert pacer.event_due("ns/pg", "Unschedulable", PERIOD_S, lambda: "4/4") == "4/4"
    assert pacer.event_due("ns/pg", "Scheduled", PERIOD_S, lambda: "ready") == "ready"
    assert pacer.event_due("ns/other", "Unschedulable", PERIOD_S, lambda: "4/4") == "4/4"


def test_the_message_is_not_built_while_the_period_forbids_an_event():
    pacer = Pacer()
    pacer.event_due("ns/pg", "Unschedulable", 0.0, lambda: "1/1")

    def boom() -> str:
        raise AssertionError("built the message though no event could go out")

    assert pacer.event_due("ns/pg", "Unschedulable", 0.3, boom) is None


def test_a_message_that_changes_every_session_settles_at_one_event_per_repeat_interval():
    pacer = Pacer()
    sent = [t for t in range(0, 300) if pacer.event_due("ns/pg", "Unschedulable", float(t), lambda t=t: f"m{t}")]
    assert sent[:EVENT_BURST] == list(range(EVENT_BURST)), "the burst goes out one period apart"
    later = sent[EVENT_BURST:]
    assert later, "refilled tokens let changes out again"
    assert all(b - a >= EVENT_REPEAT_S - 1 for a, b in itertools.pairwise(later)), later
    assert len(sent) <= EVENT_BURST + 300 / EVENT_REPEAT_S


def test_retain_forgets_what_is_gone():
    pacer = Pacer()
    pacer.event_due("ns/gone", "Unschedulable", 0.0, lambda: "x")
    pacer.event_due("ns/kept", "Unschedulable", 0.0, lambda: "x")
    pacer.queue_due("gone", ALLOCATED, 0.0)
    pacer.queue_due("kept", ALLOCATED, 0.0)
    pacer.retain({"ns/kept"}, {"kept"})
    assert pacer.event_due("ns/gone", "Unschedulable", 0.1, lambda: "x") == "x", "a new PodGroup of that name"
    assert pacer.event_due("ns/kept", "Unschedulable", 0.1, lambda: "x") is None
    assert pacer.queue_due("gone", ALLOCATED, 0.1)
    assert not pacer.queue_due("kept", ALLOCATED, 0.1)


def test_podgroup_status_of_the_same_phase_at_most_once_a_period_a_new_phase_at_once():
    pacer = Pacer()
    pending = {"phase": "Pending", "conditions": []}
    assert pacer.podgroup_due("ns/pg", {}, pending, 10.0), "its first status"
    assert not pacer.podgroup_due("ns/pg", pending, {**pending, "running": 1}, 10.2), "counters alone wait"
    assert pacer.podgroup_due("ns/other", pending, {**pending, "running": 1}, 10.3), "each PodGroup has its period"
    assert pacer.podgroup_due("ns/pg", pending, {"phase": "Inqueue"}, 10.4), "a new phase goes at once"
    assert not pacer.podgroup_due("ns/pg", {"phase": "Inqueue"}, {"phase": "Inqueue", "running": 1}, 10.5)
    assert pacer.podgroup_due("ns/pg", {"phase": "Inqueue"}, {"phase": "Inqueue", "running": 1}, 10.4 + PERIOD_S)
    pacer.retain(podgroups={"ns/other"}, queues=())
    assert pacer.podgroup_due("ns/pg", pending, {**pending, "running": 2}, 10.5 + PERIOD_S), "forgotten once gone"


def test_a_podgroup_status_sent_is_in_flight_until_its_echo():
    """The session diffs against its own watch, which trails the write (by seconds on a busy machine): the second
    session would find the stored PodGroup still without the phase it wrote and write the same status again."""
    pacer = Pacer()
    running = {"phase": "Running", "conditions": [{"type": "Scheduled", "status": "True",
                                                   "lastTransitionTime": "2026-11-26T15:00:00Z"}], "running": 0}
    later = {**running, "conditions": [{**running["conditions"][0], "lastTransitionTime": "2026-11-26T15:00:01Z"}]}
    assert not pacer.in_flight("ns/pg", running, "41", 10.0)
    assert pacer.podgroup_due("ns/pg", {}, running, 10.0, "41"), "its first status"
    assert pacer.in_flight("ns/pg", later, "41", 11.5), "the same status over the same stored object"
    assert not pacer.in_flight("ns/pg", {**running, "phase": "Completed"}, "41", 11.6), "a different one goes"
    assert not pacer.in_flight("ns/pg", running, "42", 11.6), "the stored object changed: diffed again"
    assert not pacer.in_flight("ns/pg", running, "41", 10.0 + ECHO_WAIT_S), "a write whose echo never came"
    assert not pacer.in_flight("ns/other", running, "41", 11.0), "each PodGroup its own"
    pacer.retain(podgroups=(), queues=())
    assert not pacer.in_flight("ns/pg", running, "41", 11.0), "forgotten once gone"
