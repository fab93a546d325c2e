"""Background processes of a dev cluster: spawn detached, record in pid files, stop without leftovers.

Each process leads its own session (process group), so stopping it also stops anything it spawned. A pid
file records the pid *and* the kernel's start time of that pid, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

PID_DIR = "pids"
_PR_SET_PDEATHSIG = 1
# Popen objects of our own children, so they are reaped (no zombies) and Python does not warn about them.
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """What a pid file says about one background process."""

    name: str
    pid: int
    start_ticks: int
    argv: list[str]
    log: str
    order: int  # start order; stopping goes in reverse


def _stat(pid: int | str) -> list[str] | None:
    """/proc/PID/stat from field 3 on (state, ppid, pgrp, ...); None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may contain spaces
    return None if fields[0] in ("Z", "X") else fields


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: start time in clock ticks since boot."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def _group_members(pgid: int, started_after: int) -> list[int]:
    """Live processes of process group `pgid` started no earlier than its recorded leader."""
    members = []
    for entry in Path("/proc").iterdir():
        fields = _stat(entry.name) if entry.name.isdigit() else None
        if fields is not None and int(fields[2]) == pgid and int(fields[19]) >= started_after:
            members.append(int(entry.name))
    return members


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: SIGTERM it when the parent thread dies (test sessions).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def spawn(
    name: str, argv: Sequence[str], state_dir: Path, *, env: Mapping[str, str] | None = None,
    tie_to_parent: bool = False, order: int = 0,
) -> ProcessRecord:
    """Start `argv` detached (own session, output to `<state_dir>/logs/<name>.log`) and write its pid file.

    With `tie_to_parent` the process also dies with the calling thread's process; the test fixture uses it
    so a killed pytest leaves nothing behind. `lapilli dev up` does not: its processes must outlive it.
    """
    logs = state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None, start_new_session=True,
            preexec_fn=_die_with_parent if tie_to_parent else None,
        )
    _children[proc.pid] = proc
    ticks = _start_ticks(proc.pid) or 0
    record = ProcessRecord(name, proc.pid, ticks, list(argv), str(log_path), order)
    pid_dir = state_dir / PID_DIR
    pid_dir.mkdir(parents=True, exist_ok=True)
    (pid_dir / f"{name}.json").write_text(json.dumps(asdict(record)))
    return record


def records(state_dir: Path) -> list[ProcessRecord]:
    """All pid files of a state dir, in start order."""
    out = []
    for file in sorted((state_dir / PID_DIR).glob("*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            out.append(ProcessRecord(**json.loads(file.read_text())))
    return sorted(out, key=lambda r: (r.order, r.name))


def is_alive(record: ProcessRecord) -> bool:
    """The recorded process still runs (same pid, same start time, not a zombie)."""
    _reap(record.pid)
    ticks = _start_ticks(record.pid)
    return ticks is not None and (record.start_ticks == 0 or ticks == record.start_ticks)


def _reap(pid: int) -> None:
    proc = _children.get(pid)
    if proc is not None and proc.poll() is not None:
        del _children[pid]


def stop(record: ProcessRecord, state_dir: Path, *, timeout_s: float = 10.0) -> bool:
    """SIGTERM the process, SIGKILL after `timeout_s`, then its leftover group; drop the pid file.

    Returns True if it was running.
    """
    was_alive = is_alive(record)
    if was_alive:
        _signal(record.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while is_alive(record) and time.monotonic() < deadline:
            time.sleep(0.05)
        if is_alive(record):
            _signal(record.pid, signal.SIGKILL)
            while is_alive(record):
                time.sleep(0.02)
    # Whatever it spawned that outlived it (its process group, started after it) goes too. A SIGKILL is delivered
    # when the process next runs: wait until the group is gone, so `stop` returning means nothing is left.
    deadline = time.monotonic() + timeout_s
    while (leftover := _group_members(record.pid, record.start_ticks)) and time.monotonic() < deadline:
        for pid in leftover:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.02)
    (state_dir / PID_DIR / f"{record.name}.json").unlink(missing_ok=True)
    return was_alive


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def stop_all(state_dir: Path, *, timeout_s: float = 10.0) -> list[str]:
    """Stop every recorded process, last started first; the names of those that were running."""
    return [r.name for r in reversed(records(state_dir)) if stop(r, state_dir, timeout_s=timeout_s)]
