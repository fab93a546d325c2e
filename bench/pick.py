"""Filter's pick for a pod without a plan: kept tables against the pick computed afresh (issue 19 item 2).

    .venv/bin/python bench/pick.py [--nodes 500] [--pods 800] [--repeat 5]

NODES nodes of 64 CPU / 512Gi / 8 GPUs, nothing running; PODS plain `volcano` pods of 1 CPU + 1 GPU, each offered
every node in an order of its own (kube-scheduler's parallel filter offers them unordered). Per scheduler conf —
the shipped one (GPU binpack: pods fill a node before the next) and Volcano's default (nodeorder: pods spread) —
the same pods are picked one after another, each pick taking its room as filter does, twice in this process over a
fresh extender each:

* `afresh` — the baseline: the conf's node order over the offered rows on every call, as filter computed it before
  it kept tables (`tests.service.extender_state.fresh_pick`);
* `tables` — filter's own pick (`Extender._first_in_order`: `pick.PickTables`, one row re-scored per pick).

Prints the best of REPEAT runs in µs of CPU per pick (`time.process_time`, which other work on the machine does not
inflate), the ratio, and whether both gave the same node to every pod (they must).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from extender.service import pick  # noqa: E402
from extender.service.core import Extender  # noqa: E402
from tests.service.extender_state import fresh_pick, make_extender, volcano_pod  # noqa: E402
from tests.unit.extender.engine.builders import node, queue  # noqa: E402

SHIPPED_CONF = _HERE.parent / "manifests" / "scheduler" / "lapilli-scheduler.conf"


async def _extender(nodes: int, conf: Path | None) -> Extender:
    docs = [queue({"name": "default"}),
            *(node({"name": f"node-{i:05d}", "alloc": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}})
              for i in range(nodes))]
    extender = make_extender(docs, conf=conf, scheduler_names=("volcano",))
    await extender.loop.run_once()
    return extender


def _afresh(extender: Extender) -> Callable[[dict[str, Any], list[str]], str | None]:
    order = pick.NodeOrder.of(extender.loop.conf.conf)

    def choose(pod: dict[str, Any], offered: list[str]) -> str | None:
        latest, req = extender.loop.latest, extender._request(pod)
        assert latest is not None and req is not None
        node = fresh_pick(extender, req, offered, order)
        if node is not None:
            extender._take(latest, req, node)
        return node

    return choose


async def _run(nodes: int, conf: Path | None, pods: list[dict[str, Any]], offers: list[list[str]],
               kind: str) -> tuple[float, list[str | None]]:
    extender = await _extender(nodes, conf)
    choose = _afresh(extender) if kind == "afresh" else extender._first_in_order
    started = time.process_time()
    chosen = [choose(pod, offered) for pod, offered in zip(pods, offers, strict=True)]
    return time.process_time() - started, chosen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=800)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(19)
    names = [f"node-{i:05d}" for i in range(args.nodes)]
    pods = [volcano_pod({"name": f"bench/p{i}", "req": {"cpu": "1", "nvidia.com/gpu": "1"}}) for i in range(args.pods)]
    offers = [rng.sample(names, len(names)) for _ in pods]
    for label, conf in (("shipped conf (binpack)", SHIPPED_CONF), ("Volcano's default conf (spread)", None)):
        best: dict[str, float] = {}
        answers: dict[str, list[str | None]] = {}
        for _ in range(args.repeat):
            for kind in ("afresh", "tables"):  # in turn, so a slow moment falls on both
                cpu, answers[kind] = asyncio.run(_run(args.nodes, conf, pods, offers, kind))
                best[kind] = min(best.get(kind, cpu), cpu)
        per = {kind: 1e6 * cpu / args.pods for kind, cpu in best.items()}
        same = answers["afresh"] == answers["tables"]
        print(f"{label:<32} afresh {per['afresh']:6.1f} µs/pick   tables {per['tables']:6.1f} µs/pick   "
              f"{per['tables'] / per['afresh']:.2f}x   {len(set(answers['tables']))} nodes used   "
              f"same picks: {same}", flush=True)


if __name__ == "__main__":
    main()
