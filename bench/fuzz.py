"""Bad input, measured: the whole hostile corpus of tests/fuzz/hostile.py against both faces, served for real.

    .venv/bin/python bench/fuzz.py [--seed N]

Prints the number of requests by category and by answer, the 5xx answers and crashes the server logged, the
hangs (no answer within 30 s), the reasons of more than one line, the slowest answer and the process's peak RSS
(client and server share the process and the event loop, so both numbers bound the server's from above).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fuzz.hostile import Harness, iter_cases


async def main(seed: int) -> int:
    started = time.perf_counter()
    async with Harness(timeout_s=30) as harness:
        tally = await harness.send_all(iter_cases(seed))
    print(tally.summary())
    print("by category:", ", ".join(f"{c} {n}" for c, n in sorted(tally.by_category.items())))
    for line in tally.server_errors[:20] + tally.hangs[:20] + tally.not_one_line[:20]:
        print("  ", line[:300])
    print(f"wall {time.perf_counter() - started:.0f} s")
    return 1 if tally.server_errors or tally.hangs or tally.not_one_line else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=12)
    sys.exit(asyncio.run(main(parser.parse_args().seed)))
