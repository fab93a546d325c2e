"""The service's behaviour around its scheduler configuration and failing sessions (issue 12, item 3): a bad
`--scheduler-conf` refuses to start with one readable line; a bad reload keeps the last good configuration and
says so (log, metric); sessions that keep failing make `/readyz` answer 503; unknown names warn once. The last two
of these run against the extender component as `lapilli serve` wires it, over HTTP."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from assembly.dev.service import lapilli_argv
from assembly.serve.ops import Ops
from extender.engine.conf import SchedulerConf
from extender.service.component import ExtenderComponent
from extender.service.http import make_app
from extender.service.loop import FAILING_AFTER, ConfSource
from extender.service.settings import ExtenderSettings
from tests.service.extender_state import RecordingClient
from webhook.certs import generate, write_bundle

GOOD = """actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: proportion
  - name: binpack
    arguments:
      binpack.weight: 10
"""
BAD_WEIGHT = GOOD.replace("binpack.weight: 10", "binpack.weight: abc")


def _serve(tmp_path: Path, conf: Path) -> subprocess.CompletedProcess[str]:
    tls = write_bundle(generate(["localhost"]), tmp_path / "tls")
    argv = lapilli_argv("serve", "--scheduler-conf", str(conf), "--tls-cert-file", str(tls["tls.crt"]),
                        "--tls-key-file", str(tls["tls.key"]), "--kubeconfig", os.devnull)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_a_bad_plugin_argument_refuses_to_start_with_one_readable_line(tmp_path: Path):
    conf = tmp_path / "conf.yaml"
    conf.write_text(BAD_WEIGHT)
    done = _serve(tmp_path, conf)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f'--scheduler-conf {conf}: plugin binpack: argument binpack.weight: "abc" is not a number')


def test_an_empty_conf_file_refuses_to_start(tmp_path: Path):
    conf = tmp_path / "conf.yaml"
    conf.write_text("# nothing here\n")
    done = _serve(tmp_path, conf)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(f"--scheduler-conf {conf}: configuration is empty")


def _touch_later(path: Path, text: str | None) -> None:
    """Write (or, with None, delete) the file with a modification time the source has not seen."""
    if text is None:
        path.unlink()
        return
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def test_a_bad_reload_keeps_the_last_good_conf_and_reports_each_problem_once(tmp_path: Path, caplog):
    path = tmp_path / "conf.yaml"
    path.write_text(GOOD)
    errors: list[str] = []
    source = ConfSource(path, on_error=errors.append)
    good = source.conf
    caplog.set_level(logging.ERROR, logger="lapilli.extender")
    for text, expected in [
        (BAD_WEIGHT, 'plugin binpack: argument binpack.weight: "abc" is not a number'),
        ("", "configuration is empty"),
        (None, "cannot be read"),
    ]:
        _touch_later(path, text)
        assert source.refresh() is good and source.refresh() is good  # the second look reports nothing new
        assert source.error.startswith(expected), source.error
        assert errors[-1] == source.error
    assert len(errors) == 3 and len(caplog.records) == 3
    assert all("keeping the last good configuration" in r.getMessage() for r in caplog.records)
    path.write_text(GOOD.replace("binpack.weight: 10", "binpack.weight: 5"))
    fresh = source.refresh()
    assert fresh is not good and source.error == "" and len(errors) == 3


def test_unknown_plugin_and_action_names_warn_once_and_the_rest_runs(tmp_path: Path, caplog):
    path = tmp_path / "conf.yaml"
    path.write_text(GOOD.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, shuffle-all, backfill"')
                    .replace("  - name: gang\n", "  - name: gang\n  - name: numa-aware\n"))
    caplog.set_level(logging.WARNING, logger="lapilli.extender")
    source = ConfSource(path)
    source.refresh()
    source.refresh()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert any("shuffle-all" in w for w in warnings) and any("numa-aware" in w for w in warnings)
    assert source.error == ""


class Sessions:
    """Stands in for the session runner: fails while `fail` is set, and records the configuration each session
    was given."""

    def __init__(self) -> None:
        self.fail = False
        self.confs: list[SchedulerConf] = []

    async def __call__(self, placements: dict[str, str], conf: SchedulerConf, idle: frozenset[str] = frozenset(),
                       devices: Any = None):
        self.confs.append(conf)
        if self.fail:
            raise RuntimeError("a session bug")
        return None  # "not synced yet": a session that ran without error


@dataclass
class Running:
    """The extender component of `lapilli serve` as the service wires it (conf source, metrics, readiness), its
    session loop running over `sessions`, its reflectors marked synced instead of started; `ops` serves the
    service's /readyz and /metrics, `port` the extender port."""

    component: ExtenderComponent
    sessions: Sessions
    ops: Any
    port: Any

    async def wait(self, path: str, until: Callable[[int, str], bool], on: str = "ops") -> tuple[int, str]:
        http = self.ops if on == "ops" else self.port
        async with asyncio.timeout(10):
            while True:
                resp = await http.get(path)
                answer = resp.status, await resp.text()
                if until(*answer):
                    return answer
                await asyncio.sleep(0.01)

    async def sessions_past(self, count: int) -> None:
        """Until more than `count` sessions have been asked of the runner."""
        await self.wait("/healthz", lambda *_: len(self.sessions.confs) > count)


@pytest.fixture
async def running(tmp_path: Path, aiohttp_client):
    conf = tmp_path / "conf.yaml"
    conf.write_text(GOOD)
    registry = CollectorRegistry()
    settings = ExtenderSettings(scheduler_conf=conf, session_process=False, session_period_s=0.01, why_interval_s=0)
    component = ExtenderComponent(settings, RecordingClient(), registry)  # type: ignore[arg-type]
    for reflector in component.state.reflectors:
        reflector.synced.set()
    sessions = Sessions()
    component.loop.runner = sessions
    ops_app = web.Application()
    Ops(registry, lambda: [component]).add_routes(ops_app)
    port_app = make_app(component.extender, component.is_leader, component.answering)
    served = Running(component, sessions, await aiohttp_client(ops_app), await aiohttp_client(port_app))
    task = asyncio.create_task(component.loop.run_forever())
    try:
        yield served
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _metric(text: str, name: str) -> float | None:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


@pytest.mark.asyncio(loop_scope="session")
async def test_sessions_that_keep_failing_make_readyz_503_and_back_off(running: Running):
    await running.sessions_past(0)
    assert (await running.ops.get("/readyz")).status == 200
    running.sessions.fail = True
    status, body = await running.wait("/readyz", lambda status, _: status == 503)
    assert orjson.loads(body) == {"ready": False, "waiting": ["extender"]}
    status, _ = await running.wait("/readyz", lambda status, _: True, on="port")
    assert status == 503, "the extender port's /readyz turns false too"
    _, metrics = await running.wait("/metrics", lambda *_: True)
    assert _metric(metrics, "lapilli_session_failures_total") == FAILING_AFTER
    calls = len(running.sessions.confs)
    await asyncio.sleep(0.05)
    assert len(running.sessions.confs) <= calls + 1, "a failing session is retried with a growing delay"
    running.sessions.fail = False
    await running.wait("/readyz", lambda status, _: status == 200)
    await running.wait("/readyz", lambda status, _: status == 200, on="port")


@pytest.mark.asyncio(loop_scope="session")
async def test_a_bad_reload_of_a_running_service_keeps_the_last_good_conf_and_says_so(running: Running, caplog):
    path = running.component.settings.scheduler_conf
    assert path is not None
    await running.sessions_past(0)
    good = running.sessions.confs[-1]
    caplog.set_level(logging.ERROR, logger="lapilli.extender")
    _touch_later(path, BAD_WEIGHT)
    _, metrics = await running.wait(
        "/metrics", lambda _, text: _metric(text, "lapilli_scheduler_conf_reload_errors_total") == 1)
    assert _metric(metrics, "lapilli_scheduler_conf_stale") == 1
    await running.sessions_past(len(running.sessions.confs) + 2)
    assert all(conf is good for conf in running.sessions.confs), "sessions run on with the last good conf"
    assert (await running.ops.get("/readyz")).status == 200, "still scheduling: ready"
    assert [r.getMessage() for r in caplog.records] == [
        f'scheduler configuration {path}: plugin binpack: argument binpack.weight: "abc" is not a number; '
        "keeping the last good configuration"]
    _touch_later(path, GOOD.replace("binpack.weight: 10", "binpack.weight: 5"))
    await running.wait("/metrics", lambda _, text: _metric(text, "lapilli_scheduler_conf_stale") == 0)
    await running.wait("/healthz", lambda *_: running.sessions.confs[-1] is not good)
    assert _metric((await (await running.ops.get("/metrics")).text()), "lapilli_scheduler_conf_reload_errors_total") == 1
