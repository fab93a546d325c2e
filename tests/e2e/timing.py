"""Durations the e2e tests observe, printed for bench/faults.py to collect (`TIMING <name> <seconds>`).

The tests assert only liveness (each wait has a generous timeout); how fast things happened is a measurement, taken
by the bench on a quiet machine and recorded in bench/README.md, never a threshold that fails a test under load.
"""

from __future__ import annotations

PREFIX = "TIMING"


def timing(name: str, seconds: float) -> None:
    print(f"\n{PREFIX} {name} {seconds:.2f}", flush=True)
