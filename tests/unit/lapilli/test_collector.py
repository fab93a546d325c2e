"""The cyclic collector's pause is process-wide and nests: it resumes only when the last pause ends."""

from __future__ import annotations

import gc
import threading

from lapilli import collector


def test_nested_and_overlapping_pauses_resume_the_collector_only_at_the_last_end():
    assert gc.isenabled()
    inner_started, outer_may_end = threading.Event(), threading.Event()
    seen: list[bool] = []

    def other_thread() -> None:
        with collector.paused():
            inner_started.set()
            outer_may_end.wait(5)
        seen.append(gc.isenabled())  # the main thread's pause is still on

    with collector.paused():
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        thread = threading.Thread(target=other_thread)
        thread.start()
        inner_started.wait(5)
        outer_may_end.set()
        thread.join(5)
        assert not gc.isenabled()
    assert seen == [False] and gc.isenabled()


def test_a_pause_leaves_a_collector_that_was_off_off():
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
