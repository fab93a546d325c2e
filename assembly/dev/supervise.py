"""Keep `lapilli serve` running in a dev cluster as a Deployment's kubelet keeps its container running.

`lapilli dev supervise --pid-file F -- ARGV...` starts ARGV, writes the child's pid to F, and when the child
dies for any reason other than our own stop (a crash, a SIGKILL) starts it again after a back-off: 0.5 s,
doubling to 10 s, back to 0.5 s once a child has run for a minute (the kubelet's CrashLoopBackOff, scaled
down to a developer's patience). SIGTERM/SIGINT are passed to the child, and the supervisor exits with it.
The child dies with the supervisor (PR_SET_PDEATHSIG), so `lapilli dev down` leaves nothing behind.

Every child of one supervisor gets the same `LAPILLI_LEADER_IDENTITY` (`<hostname>_<random>`, chosen once), as
every container of one pod has the pod's name: a restarted service finds its Leases held by its own identity
and leads again at once instead of waiting out the dead process's lease (15 s). Safe for the same reason it is
in a pod: the previous child is dead before the next one starts.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from lapilli.cluster.leader import IDENTITY_ENV

INITIAL_S: Final = 0.5
CAP_S: Final = 10.0
HEALTHY_AFTER_S: Final = 60.0
_PR_SET_PDEATHSIG: Final = 1


def _die_with_supervisor() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def read_pid(pid_file: Path) -> int | None:
    """The supervised child's pid, if the file names a live process."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return None if state in ("Z", "X") else pid


def supervise(argv: Sequence[str], pid_file: Path) -> int:
    """Run `argv` until told to stop; returns the last child's exit status."""
    stopping = False
    child: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    env = {**os.environ, IDENTITY_ENV: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"}
    delay = INITIAL_S
    while True:
        began = time.monotonic()
        child = subprocess.Popen(list(argv), preexec_fn=_die_with_supervisor, env=env)
        pid_file.write_text(f"{child.pid}\n")
        code = child.wait()
        if stopping:
            if read_pid(pid_file) is None:  # ours, now gone (another supervisor may have written it since)
                with contextlib.suppress(OSError):
                    pid_file.unlink()
            return code
        delay = INITIAL_S if time.monotonic() - began >= HEALTHY_AFTER_S else delay
        print(f"lapilli dev supervise: {argv[0]} exited with status {code}; restarting in {delay:g}s",
              file=sys.stderr, flush=True)
        time.sleep(delay)
        delay = min(CAP_S, delay * 2)
        if stopping:
            return code
