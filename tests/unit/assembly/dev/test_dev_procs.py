"""Background processes: pid files, liveness across pid reuse, stopping with everything they spawned."""

from __future__ import annotations

import dataclasses
import sys
import time

from assembly.dev import procs


def test_spawn_status_stop_leaves_nothing(tmp_path):
    # A parent that spawns a child ignoring SIGTERM: stopping must still leave no process behind.
    script = (
        "import signal, subprocess, sys, time;"
        "subprocess.Popen([sys.executable, '-c', 'import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print(\"child\", flush=True); time.sleep(60)']);"
        "time.sleep(60)"
    )
    record = procs.spawn("sleeper", [sys.executable, "-c", script], tmp_path, order=1)
    assert procs.records(tmp_path) == [record]
    assert procs.is_alive(record)
    # Two interpreters start before "child" is printed: on a loaded machine that can take well over 10 s.
    deadline = time.monotonic() + 60
    while "child" not in (tmp_path / "logs" / "sleeper.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "child" in (tmp_path / "logs" / "sleeper.log").read_text(), "the grandchild never started"
    members = procs._group_members(record.pid, record.start_ticks)
    assert len(members) == 2
    assert procs.stop_all(tmp_path, timeout_s=5) == ["sleeper"]
    assert not procs.is_alive(record)
    assert procs._group_members(record.pid, record.start_ticks) == []
    assert procs.records(tmp_path) == []


def test_recycled_pid_is_not_ours(tmp_path):
    record = procs.spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)
    try:
        impostor = dataclasses.replace(record, start_ticks=record.start_ticks + 1)
        assert not procs.is_alive(impostor)  # same pid, another start time: never signalled
    finally:
        procs.stop(record, tmp_path)


def test_stop_order_is_reverse_start_order(tmp_path):
    names = ["first", "second", "third"]
    for i, name in enumerate(names):
        procs.spawn(name, [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path, order=i)
    assert procs.stop_all(tmp_path) == names[::-1]
