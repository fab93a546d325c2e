"""Bad input, bounded: a deterministic sample of tests/fuzz/hostile.py's corpus (every extender verb and admission
path: malformed JSON, wrong types in every field, `.`/`..` names, empty UIDs, wrong content types, plus some of the
huge lists, 10 MB bodies and deep nesting) sent to both faces served for real. Not one answer may be a 5xx, a
crash the server logged, a hang or a reason of more than one line. The whole corpus is bench/fuzz.py's."""

from __future__ import annotations

from tests.fuzz.hostile import Harness, sample


async def test_no_hostile_body_gets_a_5xx_a_crash_a_hang_or_a_multi_line_reason():
    batch = sample(light=800, heavy=6)
    async with Harness(timeout_s=30) as harness:
        tally = await harness.send_all(batch)
    assert tally.sent == len(batch)
    assert tally.server_errors == [], tally.summary()
    assert tally.hangs == [], tally.summary()
    assert tally.not_one_line == [], tally.summary()
    assert set(tally.by_status) <= {200, 400, 405, 413, 415}, tally.summary()
