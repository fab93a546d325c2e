"""Bad input, bounded: a deterministic sample of tests/fuzz/hostile.py's corpus (every extender verb and admission
path: malformed JSON, wrong types in every field, `.`/`..` names, empty UIDs, wrong content types, plus some of the
huge lists, 10 MB bodies and deep nesting) sent to both faces served for real. Not one answer may be a 5xx, a
crash the server logged, a hang or a reason of more than one line. The whole corpus is bench/fuzz.py's."""

from __future__ import annotations

import aiohttp
import orjson

from lapilli.kube import ConfigError
from lapilli.kube.errors import ApiError
from tests.fuzz.hostile import HEAVY, Case, Harness, extender_seeds, iter_cases, sample
from tests.service.extender_state import BindFails

BIND = "/extender/gang/bind"


async def test_no_hostile_body_gets_a_5xx_a_crash_a_hang_or_a_multi_line_reason():
    batch = sample(light=800, heavy=6)
    async with Harness(timeout_s=30) as harness:
        tally = await harness.send_all(batch)
    assert tally.sent == len(batch)
    assert tally.server_errors == [], tally.summary()
    assert tally.hangs == [], tally.summary()
    assert tally.not_one_line == [], tally.summary()
    assert set(tally.by_status) <= {200, 400, 405, 413, 415}, tally.summary()


async def test_binds_the_api_server_fails_are_answers_too():
    """Every light bind case, and the valid bind itself once per failure, while every Binding POST fails: the
    failures are answers with a reason, not 5xx or logged crashes."""
    failures = (ApiError(500, "InternalError", "etcdserver: leader changed"), aiohttp.ServerDisconnectedError(),
                TimeoutError(), ConfigError("kubeconfig: exec plugin exited with status 1"))
    valid = next(doc for path, doc in extender_seeds() if path == BIND)
    batch = [c for c in iter_cases() if c.path == BIND and c.category not in HEAVY]
    batch += [Case("extender", BIND, "valid", orjson.dumps(valid)) for _ in failures]
    client = BindFails(*failures)
    async with Harness(timeout_s=30, client=client) as harness:
        tally = await harness.send_all(batch)
    assert sum(1 for verb, _ in client.calls if verb == "bind") >= len(failures), "each failure was met"
    assert tally.server_errors == [], tally.summary()
    assert tally.hangs == [], tally.summary()
    assert tally.not_one_line == [], tally.summary()
    assert set(tally.by_status) <= {200, 400, 405, 415}, tally.summary()
