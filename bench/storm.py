"""The retry storm: what a session costs with thousands of gangs that cannot fit, judged every time or parked.

    .venv/bin/python bench/storm.py [--nodes 1000] [--gangs 5000] [--gang-size 4] [--conf FILE] [--repeat 3]

NODES nodes of 8 GPUs, each full of 8 running one-GPU pods; GANGS gangs of GANG_SIZE one-GPU pods admitted
(Inqueue) that cannot fit anywhere. The service's session (`extender.service.session.run`: engine, PodGroup and
Queue status, filter's reasons, paced events) runs over the cluster state the service keeps, fed directly (no API
server), with the scheduler conf Lapilli ships (manifests/scheduler/lapilli-scheduler.conf) unless told otherwise.
Cases, each the best of REPEAT runs, CPU time of this process (`time.process_time`, which other work on the machine
does not inflate) and wall clock:

* `evaluate` — parking off: every session judges every gang (what every session cost before parking);
* `first` — parking on, the first session: it judges every gang and parks them;
* `quiet` — parking on, nothing changed since: the engine is not run again;
* `other gang` — parking on, a gang of another queue arrived: under a conf that shares queues by requests
  (proportion, drf, capacity: Volcano's default and the shipped conf) every parked gang is judged again with it.

Prints one line per case and the ratios to `evaluate`; the issue's goal is `quiet` <= 10 %.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A script in bench/ must never shadow a package it measures: drop the script directory from sys.path.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

from extender.engine.run import parse_scheduler_conf  # noqa: E402
from extender.service.pacing import Pacer  # noqa: E402
from extender.service.parking import Parking  # noqa: E402
from extender.service.runner import run_over, watch  # noqa: E402
from extender.service.state import ClusterState  # noqa: E402
from lapilli.meta import key_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_CONF = ROOT / "manifests" / "scheduler" / "lapilli-scheduler.conf"
GPU = {"cpu": "1", "nvidia.com/gpu": "1"}


def _pod(name: str, *, group: str = "", node: str = "", phase: str = "Pending") -> dict[str, Any]:
    notes = {"scheduling.k8s.io/group-name": group} if group else {}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": GPU}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec, "status": {"phase": phase},
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}", "resourceVersion": "1",
                         "annotations": notes}}


def _podgroup(name: str, size: int, queue: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}", "resourceVersion": "1"},
            "spec": {"minMember": size, "queue": queue}, "status": {"phase": "Inqueue"}}


def cluster(nodes: int, gangs: int, size: int) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in ("default", "other"):
        docs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                     "spec": {"weight": 1}, "status": {"state": "Open"}})
    for i in range(nodes):
        name = f"node-{i:05d}"
        docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                     "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}}})
        docs += [_pod(f"run-{i}-{k}", node=name, phase="Running") for k in range(8)]
    for g in range(gangs):
        docs.append(_podgroup(f"gang-{g}", size, "default"))
        docs += [_pod(f"gang-{g}-{t}", group=f"gang-{g}") for t in range(size)]
    return docs


def state_of(docs: list[dict[str, Any]]) -> ClusterState:
    state = ClusterState(client=None)  # type: ignore[arg-type]  # fed directly, no API server
    stores = {r.resource.kind: r for r in state.reflectors}
    for reflector in state.reflectors:
        reflector.synced.set()
    for doc in docs:
        stores[doc["kind"]].store[key_of(doc)] = doc
        state.apply("ADDED", doc)
    return state


class Service:
    """The service's sessions over one cluster state: statuses land in its stores as the watch would bring them."""

    def __init__(self, state: ClusterState, conf: Any, parking: Parking | None) -> None:
        self.state, self.conf, self.parking, self.pacer = state, conf, parking, Pacer()

    def session(self) -> tuple[float, float]:
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        outcome = run_over(self.state, {}, self.conf, self.pacer, parking=self.parking)
        took = time.process_time() - cpu, time.perf_counter() - wall
        for kind, key, status in outcome.status_writes:  # land, as the watch would
            store = self.state.store(kind)
            if key in store:
                obj = {**store[key], "status": {**(store[key].get("status") or {}), **status}}
                version = int(obj["metadata"].get("resourceVersion") or 0) + 1
                obj["metadata"] = {**obj["metadata"], "resourceVersion": str(version)}
                store[key] = obj
                self.state.apply("MODIFIED", obj)
        return took


def best(runs: list[tuple[float, float]]) -> dict[str, float]:
    cpu, wall = min(runs)
    return {"cpu_s": round(cpu, 4), "wall_s": round(wall, 4)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    conf = parse_scheduler_conf(Path(args.conf).read_text() if args.conf else None)
    docs = cluster(args.nodes, args.gangs, args.gang_size)
    results: dict[str, Any] = {"nodes": args.nodes, "gangs": args.gangs, "gang_size": args.gang_size,
                               "conf": args.conf or "Volcano's default"}

    off = Service(state_of(docs), conf, None)
    off.session()
    results["evaluate"] = best([off.session() for _ in range(args.repeat)])

    def parked_case(prepare: Callable[[Service, int], None]) -> dict[str, float]:
        runs = []
        for i in range(args.repeat):
            state = state_of(docs)
            service = Service(state, conf, watch(state))
            service.session()  # judges and parks every gang
            service.session()  # the statuses it wrote have landed
            prepare(service, i)
            runs.append(service.session())
        return best(runs)

    firsts = []
    for _ in range(args.repeat):
        state = state_of(docs)
        firsts.append(Service(state, conf, watch(state)).session())
    results["first"] = best(firsts)
    results["quiet"] = parked_case(lambda service, i: None)

    def other_gang(service: Service, i: int) -> None:
        for doc in [_podgroup(f"new-{i}", 1, "other"), {**_pod(f"new-{i}-0", group=f"new-{i}"),
                                                        "spec": {"containers": [{"name": "c"}]}}]:
            service.state.store(doc["kind"])[key_of(doc)] = doc
            service.state.apply("ADDED", doc)

    results["other_gang"] = parked_case(other_gang)
    base = results["evaluate"]["cpu_s"]
    for case in ("first", "quiet", "other_gang"):
        results[case]["cpu_vs_evaluate"] = round(results[case]["cpu_s"] / base, 3)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gangs", type=int, default=5000)
    parser.add_argument("--gang-size", type=int, default=4)
    parser.add_argument("--conf", default=str(SHIPPED_CONF), help="scheduler conf file ('' for Volcano's default)")
    parser.add_argument("--repeat", type=int, default=3)
    print(json.dumps(measure(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
