"""What the dev cluster's processes spend, read from /proc: CPU seconds by role and peak resident memory.

The benches that drive a whole dev cluster (verbs.py throughput, restart.py, shapes.py) share the machine's two
cores among kube-apiserver, etcd, kube-scheduler, the Lapilli service and its session process, so what each case
costs is the sum of their CPU seconds; CPU time, unlike wall clock, is not inflated by other work on the machine.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# Roles by a fragment of the command line, first match wins.
ROLES = (("kube-apiserver", "kube-apiserver"), ("etcd", "etcd"), ("kube-scheduler", "kube-scheduler"),
         ("dev kubelet", "kubelet"), ("dev supervise", ""), ("lapilli serve", "lapilli service"),
         ("resource_tracker", ""))


def process_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (parent pid, command line, CPU seconds used so far), from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        table[int(entry)] = (int(stat[1]), cmdline, (int(stat[11]) + int(stat[12])) / _TICKS_PER_S)
    return table


def descendants(table: dict[int, tuple[int, str, float]], root: int, depth: int = 5) -> set[int]:
    """`root` and the processes it started, down to `depth` generations (bench -> supervisor -> serve -> session)."""
    ours = {root}
    for _ in range(depth):
        ours |= {pid for pid, (ppid, _cmd, _cpu) in table.items() if ppid in ours}
    return ours


def role_of(table: dict[int, tuple[int, str, float]], pid: int) -> str | None:
    """What `pid` is in a dev cluster ("" for helpers not counted, None for processes of no known role)."""
    _ppid, cmd, _cpu = table[pid]
    role = next((name for key, name in ROLES if key in cmd), None)
    if role is None and "multiprocessing" in cmd:
        parent = table.get(table[pid][0], (0, "", 0.0))[1]
        role = "session process" if "lapilli serve" in parent else "do-nothing extender"
    return role


def cpu_by_role(root: int | None = None) -> dict[str, float]:
    """CPU seconds so far of `root` (this process by default) and everything it started, by role; `root` itself is
    "bench". Memory-less: call before and after and subtract."""
    root = os.getpid() if root is None else root
    table = process_table()
    out: dict[str, float] = {}
    for pid in descendants(table, root):
        role = "bench" if pid == root else role_of(table, pid)
        if role:
            out[role] = out.get(role, 0.0) + table[pid][2]
    return out


def peak_rss_mib(pid: int) -> float:
    """The peak resident set of `pid` so far (VmHWM), in MiB; 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_by_role(root: int | None = None) -> dict[str, float]:
    """Peak RSS (MiB) of each process below `root` with a role, the largest per role."""
    root = os.getpid() if root is None else root
    table = process_table()
    out: dict[str, float] = {}
    for pid in descendants(table, root):
        role = role_of(table, pid)
        if role:
            out[role] = max(out.get(role, 0.0), peak_rss_mib(pid))
    return out


def tcp_connections_opened() -> int:
    """Connections this machine's TCP stack has accepted so far (`PassiveOpens` in /proc/net/snmp), every process
    together: read before and after a quiet window and subtract. A client that keeps too few idle connections to
    an HTTP server opens new ones under concurrency, and each costs both sides a handshake and new buffers."""
    lines = [line.split() for line in Path("/proc/net/snmp").read_text().splitlines() if line.startswith("Tcp:")]
    header, values = lines[0], lines[1]
    return int(values[header.index("PassiveOpens")])
