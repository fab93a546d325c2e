"""The decay maths of lapilli.usage: half-life, sampling, restart continuity, and the annotation's format."""

from __future__ import annotations

import math

import pytest

from lapilli.usage import (
    USAGE_ANNOTATION,
    UsageRecord,
    advance,
    headline_resource,
    mean_life,
    parse_record,
    record_of,
    usage_text,
)

HOUR = 3600.0
WEEK = 168 * HOUR
GPU = "nvidia.com/gpu"


def test_a_half_life_halves_what_was_used_when_nothing_runs() -> None:
    assert advance({GPU: 8000.0}, {}, WEEK, WEEK)[GPU] == pytest.approx(4000.0)
    assert advance({GPU: 8000.0}, {}, 2 * WEEK, WEEK)[GPU] == pytest.approx(2000.0)
    assert advance({GPU: 8000.0}, {}, 0.0, WEEK)[GPU] == 8000.0


def test_a_short_run_counts_its_whole_integral_and_a_long_one_saturates_at_rate_times_mean_life() -> None:
    one_hour = advance({}, {GPU: 4000.0}, HOUR, WEEK)[GPU]  # 4 GPUs for an hour, in milli-GPU·s
    assert one_hour == pytest.approx(4000.0 * HOUR, rel=3e-3)  # barely decayed within the hour
    forever = advance({}, {GPU: 4000.0}, 100 * WEEK, WEEK)[GPU]
    assert forever == pytest.approx(4000.0 * mean_life(WEEK))
    assert mean_life(WEEK) == pytest.approx(WEEK / math.log(2))


@pytest.mark.parametrize("steps", [1, 2, 7, 288])
def test_the_sampling_interval_does_not_change_the_value_while_the_allocation_is_constant(steps: int) -> None:
    usage: dict[str, float] = {GPU: 5_000_000.0}
    for _ in range(steps):
        usage = advance(usage, {GPU: 3000.0, "cpu": 8000.0}, 86400.0 / steps, WEEK)
    whole = advance({GPU: 5_000_000.0}, {GPU: 3000.0, "cpu": 8000.0}, 86400.0, WEEK)
    assert usage == pytest.approx(whole, rel=1e-12)


def test_a_restart_continues_from_the_persisted_record() -> None:
    """A leader samples, persists, stops; the next one reads the annotation and continues the same curve."""
    start = 1_704_672_000.0
    held = {GPU: 2000.0}
    first = UsageRecord(start, WEEK, advance({}, held, 600.0, WEEK))
    persisted = first.to_annotation()
    resumed = parse_record(persisted)
    assert resumed.at == pytest.approx(start, abs=1e-6) and resumed.half_life == WEEK
    later = resumed.at_time(start + 3 * 86400.0, WEEK, held)
    uninterrupted = advance({}, held, 600.0 + 3 * 86400.0, WEEK)
    assert later[GPU] == pytest.approx(uninterrupted[GPU], rel=1e-9)


def test_the_annotation_holds_kubernetes_units() -> None:
    text = UsageRecord(0.0, WEEK, {GPU: 6_840_000_000.0, "cpu": 3_600_000.0, "memory": 2.0**30 * 3600}).to_annotation()
    assert '"nvidia.com/gpu":6840000.0' in text and '"cpu":3600.0' in text and '"halfLife":"168h0m0s"' in text
    back = parse_record(text)
    assert back.usage[GPU] == pytest.approx(6_840_000_000.0)
    assert usage_text(GPU, back.usage[GPU]) == "1,900 GPU·h"
    assert usage_text("cpu", back.usage["cpu"]) == "1.0 CPU·h"
    assert usage_text("memory", back.usage["memory"]) == "1.0 GiB·h"
    assert headline_resource(back.usage) == GPU


@pytest.mark.parametrize(("text", "error"), [
    ("not json", "not JSON"),
    ("[1]", "expected an object"),
    ('{"at": "yesterday", "halfLife": "1h", "usage": {}}', "at:"),
    ('{"at": "2024-01-01T00:00:00Z", "halfLife": "soon", "usage": {}}', "halfLife:"),
    ('{"at": "2024-01-01T00:00:00Z", "halfLife": "0s", "usage": {}}', "halfLife: must be positive"),
    ('{"at": "2024-01-01T00:00:00Z", "halfLife": "1h", "usage": {"cpu": -1}}', "usage.cpu"),
    ('{"at": "2024-01-01T00:00:00Z", "halfLife": "1h", "usage": {"cpu": "x"}}', "usage.cpu"),
    ('{"at": "2024-01-01T00:00:00Z", "halfLife": "1h", "usage": [1]}', "usage:"),
])
def test_a_malformed_record_is_a_reason_never_a_crash(text: str, error: str) -> None:
    record, why = record_of({USAGE_ANNOTATION: text})
    assert record is None and error in why and why.startswith(USAGE_ANNOTATION)


def test_clock_skew_decays_nothing_and_time_only_moves_forward() -> None:
    record = UsageRecord(1000.0, WEEK, {GPU: 100.0})
    assert record.at_time(900.0)[GPU] == 100.0


def test_the_next_sample_counts_what_a_queue_holds_two_intervals_back_at_most() -> None:
    """A record is rewritten only while its queue holds something: an old one says nothing about the time since."""
    start = 1_704_672_000.0
    record = UsageRecord(start, WEEK, {GPU: 1000.0 * HOUR})
    held = {GPU: 2000.0}
    fresh = record.next_sample(start + 300.0, WEEK, held, 300.0)  # sampled on time: counted since the record
    assert fresh == record.at_time(start + 300.0, WEEK, held)
    overnight = record.next_sample(start + 12 * HOUR, WEEK, held, 300.0)
    expected = advance(advance(record.usage, {}, 12 * HOUR - 600.0, WEEK), held, 600.0, WEEK)
    assert overnight[GPU] == pytest.approx(expected[GPU], rel=1e-12)
    assert overnight[GPU] < record.at_time(start + 12 * HOUR, WEEK, held)[GPU] / 10
