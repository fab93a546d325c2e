"""The leader's short history (lapilli/history.py): samples aligned per queue, a day kept, read back as written."""

from __future__ import annotations

import pytest

from lapilli.history import DAY_S, History, Started


def test_samples_align_queues_that_come_and_go_and_a_day_is_kept() -> None:
    history = History()
    history.sample(0.0, {"a": (2.0, 4.0)})
    history.sample(300.0, {"a": (3.0, None), "b": (1.0, 1.0)})
    history.add_started(Started("ml/x", "a", 10.0, 250.0))
    assert history.queues["a"].allocated == [2.0, 3.0] and history.queues["a"].deserved == [4.0, None]
    assert history.queues["b"].allocated == [None, 1.0], "a queue seen later has nothing before"
    back = History.from_json(history.to_json())
    assert back == history and back.started[0].waited_s == 240.0
    history.trim(DAY_S + 260.0)
    assert history.times == [300.0] and history.queues["a"].allocated == [3.0] and history.started == []
    history.trim(DAY_S + 400.0)
    assert history.times == [] and history.queues == {}


@pytest.mark.parametrize("text", ["", "[]", '{"times": [1], "queues": {"a": {"allocated": [], "deserved": []}}}',
                                  '{"times": ["x"]}'])
def test_a_record_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        History.from_json(text)


def test_a_job_reported_again_replaces_its_entry_and_others_are_appended() -> None:
    history = History(started=[Started("ml/x", "a", 10.0, 20.0)])
    history.add_started(Started("ml/y", "a", 11.0, 21.0))
    history.add_started(Started("ml/x", "a", 10.0, 25.0))  # the same run reported again (a new term's pending)
    history.add_started(Started("ml/x", "a", 30.0, 40.0))  # a later run under the same name
    assert [(s.key, s.created, s.started) for s in history.started] == [
        ("ml/y", 11.0, 21.0), ("ml/x", 10.0, 25.0), ("ml/x", 30.0, 40.0)]
    back = History.from_json(history.to_json())
    back.add_started(Started("ml/y", "a", 11.0, 22.0))
    assert [(s.key, s.started) for s in back.started] == [("ml/x", 25.0), ("ml/x", 40.0), ("ml/y", 22.0)]
    back.trim(DAY_S + 30.0)  # ml/x of 25 s and ml/y of 22 s fall out of the day
    back.add_started(Started("ml/x", "a", 10.0, DAY_S + 31.0))
    assert [(s.key, s.created) for s in back.started] == [("ml/x", 30.0), ("ml/x", 10.0)]
