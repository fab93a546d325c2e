"""Timings the e2e tests observe (fault recovery, reclaim, a gang bound after room appears), measured here.

    .venv/bin/python bench/faults.py [--runs 2] [TEST PATH …]

The tests only assert liveness (generous timeouts) and print what they saw as `TIMING <name> <seconds>`
(tests/e2e/timing.py); this runs them with pytest `-s`, collects those lines over `--runs` runs and prints, per
name, the values and their median, with the load average before and after. Without paths it runs the fault tier,
the lab platform's reclaim and the extender's gang test. Run it on a quiet machine; record the table in
bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["tests/e2e/faults", "tests/e2e/test_lab_platform.py",
           "tests/e2e/test_extender.py::test_gang_binds_whole_once_a_fourth_node_arrives"]
LINE = re.compile(r"^TIMING (\S+) ([0-9.]+)$", re.M)


def run_once(paths: list[str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *paths],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"the tests failed (exit {done.returncode}):\n{done.stdout[-4000:]}")
    return {name: float(value) for name, value in LINE.findall(done.stdout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("paths", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    load_before = os.getloadavg()
    seen: dict[str, list[float]] = {}
    for _ in range(args.runs):
        for name, value in run_once(args.paths).items():
            seen.setdefault(name, []).append(value)
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f} / after {load_after[0]:.2f} (1 min); {args.runs} runs")
    print(f"{'timing':48} {'median s':>9}  runs")
    for name in sorted(seen):
        values = seen[name]
        print(f"{name:48} {statistics.median(values):9.2f}  {', '.join(f'{v:.2f}' for v in values)}")


if __name__ == "__main__":
    main()
