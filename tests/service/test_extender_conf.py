"""The service's behaviour around its scheduler configuration and failing sessions (issue 12, item 3): a bad
`--scheduler-conf` refuses to start with one readable line; a bad reload keeps the last good configuration and
says so (log, metric); sessions that keep failing make `/readyz` false; unknown names warn once."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from assembly.dev.service import lapilli_argv
from extender.engine.conf import SchedulerConf
from extender.service.loop import FAILING_AFTER, ConfSource, SessionLoop
from extender.service.metrics import ExtenderMetrics
from extender.service.plan import Plan
from tests.service.extender_state import RecordingClient, cluster_state
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


class FailingRunner:
    def __init__(self) -> None:
        self.fail = True
        self.calls = 0

    async def __call__(self, placements: dict[str, str], conf: SchedulerConf):
        self.calls += 1
        if self.fail:
            raise RuntimeError("a session bug")
        return None  # "not synced yet": a session that ran without error


@pytest.mark.asyncio(loop_scope="session")
async def test_sessions_that_keep_failing_make_the_service_unready_and_back_off():
    state = cluster_state([])
    registry = CollectorRegistry()
    metrics = ExtenderMetrics(registry, parked=lambda: 0, restarts=state.restarts)
    runner = FailingRunner()
    loop = SessionLoop(state, Plan(ttl_s=60), RecordingClient(), ConfSource(None), metrics,  # type: ignore[arg-type]
                       period_s=0.01, runner=runner)
    task = asyncio.create_task(loop.run_forever())
    try:
        async with asyncio.timeout(10):
            while loop.healthy():
                await asyncio.sleep(0.01)
        assert loop.failures == FAILING_AFTER
        assert registry.get_sample_value("lapilli_session_failures_total") == FAILING_AFTER
        await asyncio.sleep(0.05)
        assert runner.calls <= FAILING_AFTER + 1, "a failing session is retried with a growing delay"
        runner.fail = False
        async with asyncio.timeout(10):
            while not loop.healthy():
                await asyncio.sleep(0.01)
        assert loop.failures == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
