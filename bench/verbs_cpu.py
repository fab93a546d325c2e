"""The extender's filter and prioritize with per-card state, in CPU time (issue 18 item 7).

    .venv/bin/python bench/verbs_cpu.py [--nodes 1000] [--requests 2000]

bench/verbs.py `latency --vgpu`'s two clusters (the same nodes with 8 whole GPUs, or 8 registered 80 GB cards) and
its requests (a planned gang member, and a single pod of an admitted gang of one that no session has planned), but
in this process: each request is decoded (orjson + the wire model), answered by the Extender and its reply encoded,
and timed with `time.process_time`, the service idle after one session. CPU time depends little on the machine's
load, so the ratio vGPU / whole GPUs can be taken while others work; the wall-clock latency over loopback (aiohttp,
the kernel) is bench/verbs.py's, for a quiet machine. Prints p50/p99 per case and the ratio of the p99s.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

import orjson
import verbs
from pydantic import BaseModel


async def _extender(nodes: int, vgpu: bool) -> Any:
    return verbs._extender(*await verbs._service(nodes, vgpu))


def _bodies(nodes: int, vgpu: bool, kind: str, count: int) -> list[bytes]:
    from tests.unit.extender.engine.builders import pod

    names = [f"n{i:05d}" for i in range(nodes)]
    ask = verbs._gpu_ask(vgpu)
    bodies = []
    for r in range(count):
        if kind == "gang":  # a planned member
            g = r % max(nodes // 4, 1)
            member = pod({"name": f"ml/g{g}-w-{r % 8}", "group": f"g{g}", "req": ask, "limits": ask})
        else:  # a single pod of an admitted gang of one, not planned
            member = pod({"name": f"ml/s{r % verbs.SINGLES}-p", "group": f"s{r % verbs.SINGLES}", "req": ask,
                          "limits": ask})
        bodies.append(orjson.dumps({"Pod": member, "Nodes": None, "NodeNames": names}))
    return bodies


def _measure(extender: Any, verb: str, bodies: list[bytes]) -> tuple[float, float]:
    """p50 and p99 in ms of CPU time; the first 50 requests warm up."""
    from extender.service.wire import ExtenderArgs

    samples = []
    for r, body in enumerate(bodies):
        start = time.process_time()
        result = getattr(extender, verb)(ExtenderArgs.model_validate(orjson.loads(body)))
        orjson.dumps(result.model_dump(by_alias=True) if isinstance(result, BaseModel) else result)
        if r >= 50:
            samples.append(time.process_time() - start)
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.99) - 1] * 1000


async def main_async(nodes: int, requests: int) -> None:
    extenders = {vgpu: await _extender(nodes, vgpu) for vgpu in (False, True)}
    gc.freeze()  # what ExtenderComponent does once the caches are synced
    print(f"{'nodes':>6} {'request':<8} {'verb':<11} {'whole GPUs p50/p99 ms':>22} {'vGPU p50/p99 ms':>18} "
          f"{'p99 ratio':>10}")
    for kind in ("gang", "single"):
        for verb in ("filter", "prioritize"):
            result = {vgpu: _measure(extenders[vgpu], verb, _bodies(nodes, vgpu, kind, requests + 50))
                      for vgpu in (False, True)}
            whole, shared = result[False], result[True]
            label = "member" if kind == "gang" else "single"
            print(f"{nodes:>6} {label:<8} {verb:<11} {whole[0]:>12.3f} / {whole[1]:.3f} {shared[0]:>10.3f} / "
                  f"{shared[1]:.3f} {shared[1] / whole[1]:>9.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    for nodes in args.nodes:
        asyncio.run(main_async(nodes, args.requests))


if __name__ == "__main__":
    main()
