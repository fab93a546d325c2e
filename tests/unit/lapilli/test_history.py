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
