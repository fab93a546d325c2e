"""Extender numbers (issue 4).

    .venv/bin/python bench/verbs.py latency [--nodes 1000 5000] [--requests 2000] [--vgpu]
    .venv/bin/python bench/verbs.py throughput [--nodes 500] [--pods 800] [--repeat 1] [--cases 2 3 ...]

latency: the real aiohttp app of the extender runs in a child process over a synthetic cluster (nodes of 8 GPUs,
gangs of 8 planned); the parent posts filter and prioritize requests for planned members with every node name
(`nodeCacheCapable`), one at a time over loopback, and reports p50/p99 — once with the service idle and once
while scheduling sessions run back to back (from the session process's first outcome on: it builds its own copy of
the cluster first). The baseline in the same run is a bare aiohttp handler that decodes the same body and answers a
fixed reply. Sessions run in a child process (`--session-process`, the default of `lapilli serve`) that keeps its
own copy of the cluster.

latency --vgpu (issue 18): the same, with shared GPUs next to whole GPUs over the same number of nodes. The vGPU
cluster's nodes register 8 cards of 80 GB (`volcano.sh/node-vgpu-register`, split 10) and advertise the vGPU totals;
its gang members ask one card and 40 GB (`volcano.sh/vgpu-number` / `vgpu-memory`) where the whole-GPU members ask
one `nvidia.com/gpu`; the conf is Volcano's default plus `deviceshare` with `deviceshare.VGPUEnable`. Two kinds of
request each: a planned gang member (filter answers its planned node), and a single pod of an admitted gang of one
that no session has planned yet (filter passes every offered node for a whole GPU, and checks each node's cards
for a vGPU ask, through `CardBook`). Each with the service idle, with sessions paced as the service runs them while
changes keep coming (`SessionLoop.run_forever` poked all the time: a session 0.2 s after the last one ended), and
with sessions back to back (a stress case: ~40 a second here, ten times the service's rate). Idle and paced, the
two servers of a state run at once and the requests take turns between them (`--requests` each), so what else the
machine does falls on both alike; back to back, a session process keeps a core busy, so the servers run one at a
time, three rounds in turn, each side's latencies pooled. Rows give p50/p99 and the vGPU/whole-GPU ratio of p99
(goal: within 1.2×).

throughput: a dev cluster (real kube-apiserver + kube-scheduler 1.20, simulated nodes) per case; pods are
created as fast as the API takes them and the clock stops when the last one is bound. Cases: plain
kube-scheduler on single pods (no extender configured), single pods through the extender, gangs of 8 through
the extender (permit cache), single pods without the service's controllers, and single pods through a
do-nothing extender (same wire and entries: filter echoes the offered nodes, prioritize answers nothing, bind
POSTs the Binding) with no Lapilli service at all — what the extender protocol alone costs on this machine;
single pods through the extender over TLS; and the do-nothing extender answering only the first offered node, the
protocol's floor for a pod the extender has planned (kube-scheduler then neither scores nor calls prioritize);
and that extender again for gangs of 8, keeping every pod and PodGroup in memory through a watch: the floor for any
scheduler that must know a gang's members; and that one once more, also writing each gang's PodGroup status and
Events as Volcano's semantics ask (Inqueue and an Unschedulable Event, then Running and a Scheduled Event): the floor
for a scheduler that keeps Volcano's observable behaviour; and the same for single pods, each given its PodGroup as
Volcano's PodGroup controller does (the floor for case 2, less the PodGroup's two admission webhook calls); and,
through the extender, gangs of 8 and single pods in one burst (every other group of 8 pods a gang), as a shared
cluster has them.
The service's extender port is plain HTTP on loopback in every other case, as the shipped pod runs it
(kube-scheduler beside the service). Per case it prints pods/s, CPU ms per pod per process, kube-apiserver's writes
and reads per pod, the TCP connections the machine accepted per pod (kube-scheduler 1.20's extender client keeps
two idle connections, so overlapping calls open new ones) and, through the service, how its filter answered pods
without a plan (one node picked, or every node passed: `lapilli_extender_picks_total`) and its calls per verb,
and the case's timeline: when the last create was answered and when the first, 10 %, 50 %, 90 % and last pods were
seen bound (a case slow to start and one slow throughout read alike in pods/s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import multiprocessing as mp
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

# A script in bench/ must never shadow a package it measures: drop the script directory Python put first, and
# reach its siblings as the package `bench` from the repository root.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from bench.procstats import cpu_by_role, tcp_connections_opened  # noqa: E402


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.99) - 1] * 1000


# ---- latency ----------------------------------------------------------------------------------------------
VGPU_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},
            {name: deviceshare, arguments: {deviceshare.VGPUEnable: true}}]
"""
CARDS = 8
SINGLES = 64  # admitted gangs of one with no pod in the cache yet: a single pod's filter has no plan to answer


def _gpu_ask(vgpu: bool, cards: int = 1) -> dict[str, str]:
    if vgpu:
        return {"cpu": "1", "volcano.sh/vgpu-number": str(cards), "volcano.sh/vgpu-memory": str(40960 * cards)}
    return {"cpu": "1", "nvidia.com/gpu": str(cards)}


def _gpu_node(i: int, vgpu: bool) -> dict[str, Any]:
    from tests.unit.extender.engine.builders import node

    name = f"n{i:05d}"
    if not vgpu:
        return node({"name": name, "alloc": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(CARDS)}})
    register = "".join(f"{name}-gpu{c},10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:" for c in range(CARDS))
    return node({"name": name, "annotations": {"volcano.sh/node-vgpu-register": register},
                 "alloc": {"cpu": "64", "memory": "512Gi", "volcano.sh/vgpu-number": str(10 * CARDS),
                           "volcano.sh/vgpu-memory": str(81920 * CARDS), "volcano.sh/vgpu-cores": str(100 * CARDS)}})


def _cluster_docs(nodes: int, vgpu: bool = False) -> list[dict[str, Any]]:
    from tests.unit.extender.engine.builders import pod, podgroup, queue

    docs = [_gpu_node(i, vgpu) for i in range(nodes)]
    docs.append(queue({"name": "default"}))
    gangs = nodes // 4  # fills a quarter of the GPUs; sessions keep re-planning the unplaceable overflow below
    ask = _gpu_ask(vgpu)
    for g in range(gangs):
        docs.append(podgroup({"name": f"ml/g{g}", "min": 8, "phase": "Inqueue"}))
        for i in range(8):
            docs.append(pod({"name": f"ml/g{g}-w-{i}", "group": f"g{g}", "req": ask, "limits": ask}))
    docs.append(podgroup({"name": "ml/huge", "min": nodes * 9, "phase": "Inqueue"}))
    huge = _gpu_ask(vgpu, CARDS + 1)
    for i in range(nodes):
        docs.append(pod({"name": f"ml/huge-w-{i}", "group": "huge", "req": huge, "limits": huge}))
    # The single-pod requests name these (64 gangs of one without pods: nothing for a session to do).
    docs.extend(podgroup({"name": f"ml/s{s}", "min": 1, "phase": "Inqueue"}) for s in range(SINGLES))
    return docs


def _synthetic_state(nodes: int, vgpu: bool = False) -> Any:
    from extender.service.state import ClusterState
    from lapilli.meta import key_of

    state = ClusterState(client=None)  # type: ignore[arg-type]  # fed directly, no API server
    for reflector in state.reflectors:
        reflector.synced.set()
    for obj in _cluster_docs(nodes, vgpu):
        reflector = next(r for r in state.reflectors if r.resource.kind == obj["kind"])
        reflector.store[key_of(obj)] = obj
        state.apply("ADDED", obj)
    return state


class _EchoWrites:
    """The session process's end of the pipe. With no API server, a status write would never come back through
    the watch, and every session would send all of them again; this stores each outcome's writes into the
    session process's state as the watch would (so the pipe carries what a live cluster's would)."""

    def __init__(self, conn: Any, state: Any) -> None:
        self.conn, self.state = conn, state

    def recv(self) -> Any:
        return self.conn.recv()

    def send(self, reply: Any) -> None:
        self.conn.send(reply)
        outcome = reply[0]
        for kind, key, status in outcome.status_writes if outcome is not None else ():
            store = self.state.store(kind)
            if key in store:
                store[key] = {**store[key], "status": {**(store[key].get("status") or {}), **status}}


def _session_child(nodes: int, vgpu: bool, conn: Any) -> None:
    """The session process of the busy case: the same loop as the service's, over the synthetic cluster."""
    from extender.service.runner import serve_sessions

    state = _synthetic_state(nodes, vgpu)
    asyncio.run(serve_sessions(state, _EchoWrites(conn, state)))


async def _service(nodes: int, vgpu: bool) -> tuple[Any, Any, Any, Any]:
    """The service's state, plan, session loop and metrics over the synthetic cluster, after one session (no API
    server: status writes and Events go nowhere)."""
    from prometheus_client import CollectorRegistry

    from extender.service.loop import ConfSource, SessionLoop
    from extender.service.metrics import ExtenderMetrics
    from extender.service.plan import Plan

    state = _synthetic_state(nodes, vgpu)
    plan = Plan(ttl_s=3600)
    metrics = ExtenderMetrics(CollectorRegistry(), parked=lambda: 0, restarts=state.restarts)
    conf_path = None
    if vgpu:
        conf_path = Path(tempfile.mkdtemp(prefix="lapilli-bench-")) / "scheduler.conf"
        conf_path.write_text(VGPU_CONF)
    loop = SessionLoop(state, plan, None, ConfSource(conf_path), metrics)  # type: ignore[arg-type]

    async def no_writes(_outcome: Any) -> None:
        return None

    loop._write_status = no_writes  # type: ignore[method-assign]  # no API server here
    loop._record_events = lambda _outcome: None  # type: ignore[method-assign]
    loop._touch = lambda _key: asyncio.sleep(0)  # type: ignore[method-assign]  # a term's requeue patches pods
    await loop.run_once()
    return state, plan, loop, metrics


def _extender(state: Any, plan: Any, loop: Any, metrics: Any) -> Any:
    from extender.service.core import Extender
    from extender.service.permit import PermitCache

    return Extender(state, plan, loop, PermitCache(lambda *a: asyncio.sleep(0, ""), 30), None, metrics)  # type: ignore[arg-type]


IDLE, PACED, BACK_TO_BACK = "idle", "sessions paced", "sessions back to back"


def _serve_extender(nodes: int, port: int, sessions: str, vgpu: bool, ready: Any) -> None:
    """The extender over the synthetic cluster with no sessions (IDLE), with sessions run as the service runs them
    when changes keep coming (PACED: `SessionLoop.run_forever`, poked all the time, so each session starts
    `MIN_SESSION_GAP_S` after the last one ended), or with sessions back to back (BACK_TO_BACK: the next one as
    soon as the last one's outcome is in, ten times the service's rate here; a stress case)."""
    from extender.service.http import make_app
    from extender.service.runner import ProcessRunner

    async def poke_forever(loop: Any) -> None:
        while True:
            loop.poke()
            await asyncio.sleep(0.01)

    async def main() -> None:
        state, plan, loop, metrics = await _service(nodes, vgpu)
        if sessions != IDLE:
            runner = ProcessRunner(None, target=_session_child, args=(nodes, vgpu))
            runner.start()
            loop.runner = runner  # sessions in a child process, as the service runs them
            # Measured once sessions run: the child builds its copy of the cluster first, a few seconds of a core
            # that would otherwise land on the first requests.
            await loop.run_once()
        sys.setswitchinterval(0.0002)  # what SessionLoop.run_forever sets
        gc.freeze()  # what ExtenderComponent does once the caches are synced
        extender = _extender(state, plan, loop, metrics)
        runner = web.AppRunner(make_app(extender, lambda: True, lambda: True), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        if sessions == PACED:
            await asyncio.gather(loop.run_forever(), poke_forever(loop))
        while sessions == BACK_TO_BACK:
            await loop.run_once()
        await asyncio.Event().wait()

    asyncio.run(main())


def _serve_routes(port: int, ready: Any, routes: dict[str, Any], beside: Any = None) -> None:
    """A bare aiohttp app with these POST handlers on 127.0.0.1:`port`, until the process is ended; `beside`, a
    coroutine function run alongside once the app serves."""

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        for path, handler in routes.items():
            app.router.add_post(path, handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        if beside is not None:
            await beside()
        await asyncio.Event().wait()

    asyncio.run(main())


def _serve_baseline(port: int, ready: Any) -> None:
    reply = orjson.dumps({"NodeNames": ["n00000"], "FailedNodes": {}, "Error": ""})

    async def handle(request: web.Request) -> web.Response:
        orjson.loads(await request.read())
        return web.Response(body=reply, content_type="application/json")

    _serve_routes(port, ready, {"/extender/filter": handle, "/extender/prioritize": handle})


def _body(names: list[str], r: int, vgpu: bool, kind: str) -> bytes:
    """Request `r` of a kind: a planned gang member, or a single pod of an admitted gang of one, not planned."""
    from tests.unit.extender.engine.builders import pod

    ask = _gpu_ask(vgpu)
    if kind == "gang":
        g = r % max(len(names) // 4, 1)
        member = pod({"name": f"ml/g{g}-w-{r % 8}", "group": f"g{g}", "req": ask, "limits": ask})
    else:
        member = pod({"name": f"ml/s{r % SINGLES}-p", "group": f"s{r % SINGLES}", "req": ask, "limits": ask})
    return orjson.dumps({"Pod": member, "Nodes": None, "NodeNames": names})


async def _measure_turns(targets: list[tuple[int, bool]], nodes: int, verb: str, requests: int,
                         kind: str = "gang") -> list[list[float]]:
    """Latencies of `requests` requests to each (port, vGPU asks) of `targets`, one at a time, taking turns, so
    whatever else the machine does meanwhile falls on each alike; the first 50 of each are a warm-up."""
    samples: list[list[float]] = [[] for _ in targets]
    names = [f"n{i:05d}" for i in range(nodes)]
    async with aiohttp.ClientSession() as http:
        for r in range(requests + 50):
            for (port, vgpu), out in zip(targets, samples, strict=True):
                body = _body(names, r, vgpu, kind)
                start = time.perf_counter()
                async with http.post(f"http://127.0.0.1:{port}/extender/{verb}", data=body,
                                     headers={"Content-Type": "application/json"}) as resp:
                    await resp.read()
                if r >= 50:
                    out.append(time.perf_counter() - start)
    return samples


@contextlib.contextmanager
def _server(target: Any, args: tuple[Any, ...]) -> Iterator[None]:
    """`target(*args, ready)` in a process of its own, from when it says it is ready until the block ends."""
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=target, args=(*args, ready))  # not daemonic: it starts a session process
    proc.start()
    try:
        if not ready.wait(600):
            raise RuntimeError("server did not start")
        yield
    finally:
        proc.terminate()
        proc.join()


def _run_case(target: Any, args: tuple[Any, ...], port: int, nodes: int, requests: int) -> dict[str, tuple]:
    """{verb: (p50, p99)} of one server asked about planned gang members."""
    with _server(target, args):
        return {verb: _percentiles(asyncio.run(_measure_turns([(port, False)], nodes, verb, requests))[0])
                for verb in ("filter", "prioritize")}


def latency(nodes_list: list[int], requests: int) -> None:
    print(f"{'nodes':>6} {'case':<28} {'filter p50/p99 ms':>20} {'prioritize p50/p99 ms':>24}")
    for nodes in nodes_list:
        cases = [
            ("baseline (decode + fixed reply)", _serve_baseline, (18081,)),
            ("extender, idle", _serve_extender, (nodes, 18082, IDLE)),
            ("extender, sessions running", _serve_extender, (nodes, 18083, BACK_TO_BACK)),
        ]
        for label, target, args in cases:
            port = args[-1] if target is _serve_baseline else args[1]
            if target is _serve_extender:
                args = (*args[:3], False)
            result = _run_case(target, args, port, nodes, requests)
            f, p = result["filter"], result["prioritize"]
            print(f"{nodes:>6} {label:<28} {f[0]:>8.2f} / {f[1]:>6.2f}   {p[0]:>10.2f} / {p[1]:>6.2f}", flush=True)


def _one_at_a_time(targets: list[tuple[int, bool]], nodes: int, requests: int, kinds: tuple[str, ...],
                   verbs: tuple[str, ...], rounds: int = 3) -> dict[tuple[str, str], list[list[float]]]:
    """Sessions back to back keep a core busy: two such servers at once would leave the client and the verbs the
    scraps of two cores. So each server runs alone, `rounds` times in turn, and each side's latencies are pooled
    ({(kind, verb): [whole GPUs' latencies, vGPU's]})."""
    got: dict[tuple[str, str], list[list[float]]] = {(kind, verb): [[], []] for kind in kinds for verb in verbs}
    for _ in range(rounds):
        for side, (port, vgpu) in enumerate(targets):
            with _server(_serve_extender, (nodes, port, BACK_TO_BACK, vgpu)):
                for kind in kinds:
                    for verb in verbs:
                        got[kind, verb][side] += asyncio.run(
                            _measure_turns([(port, vgpu)], nodes, verb, requests // rounds, kind))[0]
    return got


def latency_vgpu(nodes_list: list[int], requests: int) -> None:
    """Whole GPUs and vGPU cards over the same nodes: idle, with sessions paced as the service runs them, and with
    sessions back to back; each pair of servers is asked about planned gang members and about unplanned single
    pods.

    Both servers of a state run at once and the requests take turns between them: a p99 of sub-millisecond requests
    moves by a tenth of a millisecond with whatever else the two cores do, and one server measured after the other
    would put that drift into the ratio. Back to back, the servers take turns whole instead (`_one_at_a_time`)."""
    print(f"{'nodes':>6} {'case':<44} {'filter p50/p99 ms':>20} {'prioritize p50/p99 ms':>24}")
    kinds, verbs = ("gang", "single"), ("filter", "prioritize")
    for nodes in nodes_list:
        base = _run_case(_serve_baseline, (18081,), 18081, nodes, requests)
        f, p = base["filter"], base["prioritize"]
        print(f"{nodes:>6} {'baseline (decode + fixed reply)':<44} {f[0]:>8.2f} / {f[1]:>6.2f}   "
              f"{p[0]:>10.2f} / {p[1]:>6.2f}", flush=True)
        for case, state in enumerate((IDLE, PACED, BACK_TO_BACK)):
            targets = [(18082 + 2 * case + vgpu, vgpu) for vgpu in (False, True)]
            if state == BACK_TO_BACK:
                got = _one_at_a_time(targets, nodes, requests, kinds, verbs)
            else:
                with contextlib.ExitStack() as servers:
                    for port, vgpu in targets:
                        servers.enter_context(_server(_serve_extender, (nodes, port, state, vgpu)))
                    got = {(kind, verb): asyncio.run(_measure_turns(targets, nodes, verb, requests, kind))
                           for kind in kinds for verb in verbs}
            for side, gpus in enumerate(("whole GPUs", "vGPU cards")):
                for kind in kinds:
                    f, p = (_percentiles(got[kind, verb][side]) for verb in verbs)
                    label = f"{gpus}, {state}, {'member' if kind == 'gang' else 'single'}"
                    print(f"{nodes:>6} {label:<44} {f[0]:>8.2f} / {f[1]:>6.2f}   {p[0]:>10.2f} / {p[1]:>6.2f}",
                          flush=True)
            for kind in kinds:
                ratios = [_percentiles(got[kind, v][1])[1] / _percentiles(got[kind, v][0])[1] for v in verbs]
                label = f"vGPU/whole p99, {state}, {'member' if kind == 'gang' else 'single'}"
                print(f"{nodes:>6} {label:<44} {ratios[0]:>17.2f}x   {ratios[1]:>21.2f}x", flush=True)


# ---- throughput ---------------------------------------------------------------------------------------------
_WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_READ_VERBS = frozenset({"GET", "LIST"})  # a WATCH is counted when it ends, so not per pod
_COUNTED_VERBS = _WRITE_VERBS | _READ_VERBS


def _is_read(what: str) -> bool:
    """Whether a counter key of `_api_counts` ("VERB resource[/subresource]") counts reads."""
    return what.split(" ", 1)[0] in _READ_VERBS
_METRIC_LINE = re.compile(r'^(apiserver_request_total|apiserver_admission_webhook_admission_duration_seconds_count)'
                          r'\{([^}]*)\} ([0-9.e+]+)$')


async def _api_counts(client: Any) -> dict[str, float]:
    """kube-apiserver's own counters, from its /metrics: requests by verb, resource and subresource (writes, and the
    reads GET and LIST), and admission webhook calls by webhook. Counts, not times: what they say does not depend on
    the machine's load."""
    async with client._http().get("/metrics", headers=await client._auth(None), **client._route()) as resp:
        text = await resp.text()
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _METRIC_LINE.match(line)
        if match is None:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match[2]))
        if match[1] == "apiserver_request_total":
            if labels.get("verb") not in _COUNTED_VERBS:
                continue
            what = labels.get("resource", "") + (f"/{labels['subresource']}" if labels.get("subresource") else "")
            key = f"{labels['verb']} {what}"
        else:
            key = f"webhook {labels.get('name', '')} ({labels.get('type', '')})"
        out[key] = out.get(key, 0.0) + float(match[3])
    return out


async def _service_counts(cluster: Any) -> dict[str, float]:
    """The service's `lapilli_extender_picks_total` by result: pods without a plan its filter answered with one node
    (picked) or with every offered node (passed, and kube-scheduler scored them all); its re-plans of planned pods
    (`lapilli_extender_replans_total`); and its calls per verb."""
    from tests.e2e.metrics import service_metric

    counted = {result: await service_metric(cluster, "lapilli_extender_picks_total", {"result": result})
               for result in ("picked", "passed")}
    # Planned pods kube-scheduler did not offer their planned node: filter moved them, or found no node.
    counted |= {f"replans {result}": await service_metric(cluster, "lapilli_extender_replans_total",
                                                          {"result": result})
                for result in ("moved", "failed")}
    # Calls per verb: a filter count above one a pod is kube-scheduler asking again for pods it set aside.
    counted |= {f"{verb} calls": await service_metric(cluster, "lapilli_extender_request_duration_seconds_count",
                                                      {"verb": verb})
                for verb in ("filter", "prioritize", "bind")}
    return {result: n for result, n in counted.items() if n is not None}


# What the do-nothing extender's filter answers: every offered node, or the first one only; WATCHING answers the
# first one and keeps a watch of pods and PodGroups too; WRITING also writes what Volcano writes per PodGroup.
ECHO_NODES, ONE_NODE, WATCHING, WRITING = "echo", "one", "one-watching", "one-watching-writing"


def serve_null_extender(port: int, kubeconfig: str, ready: Any, answer_one: bool = False,
                        watching: bool = False, writing: bool = False) -> None:
    """A do-nothing extender on aiohttp: the protocol's cost without any scheduling work. `answer_one`: filter
    answers the first offered node only, as Lapilli's filter answers a planned pod's node, so kube-scheduler then
    skips scoring and prioritize (one feasible node) and only filter and bind cross the wire. `watching`: it also
    keeps every pod and PodGroup of the cluster in memory through Lapilli's reflector (list, then watch, each event
    decoded into a store) and does nothing else with them: the least a scheduler that knows which pods form a gang
    pays on top of the protocol (Lapilli pays it twice, in the service and in its session process). `writing`
    (with `watching`): it also makes the writes Volcano's semantics ask of every gang and that Lapilli makes
    (bench/README, "Floors that keep Volcano's writes"): once a PodGroup's first member is seen, its status Inqueue
    and its Unschedulable Event (the gang is not whole yet), then, once minMember members are bound, its status
    Running and its Scheduled Event; a pod that names no PodGroup gets one of its own as Volcano's PodGroup
    controller makes it (`podgroup-<uid>`, one member), then, once bound, the same Running status and Event. Each in
    the background, as Lapilli's controllers and session loop write them, never in the verb's path. Volcano's
    admission webhooks for the PodGroup are not called (this extender serves none): a floor below the real one."""
    from lapilli.api.constants import GROUP_NAME_ANNOTATION
    from lapilli.cluster.reflector import Event, Reflector
    from lapilli.kube import KubeClient, load_kubeconfig
    from lapilli.kube.events import EventRecorder
    from lapilli.kube.resources import PODGROUPS, PODS
    from lapilli.meta import annotations_of, key_of, name_of, namespace_of, uid_of
    from lapilli.plainpods import podgroup_name_for
    from lapilli.times import rfc3339

    clients: list[KubeClient] = []
    reflectors: list[Reflector] = []  # held here: the event loop keeps only weak references to their tasks
    recorders: list[EventRecorder] = []
    writes: set[asyncio.Task[Any]] = set()
    gate = asyncio.Semaphore(16)
    bound: dict[str, int] = {}  # PodGroup key -> members bound
    singles: dict[str, dict[str, Any]] = {}  # pod key -> the metadata of the PodGroup made for it
    early: set[str] = set()  # single pods bound before their PodGroup was made

    def in_background(write: Any) -> None:
        task = asyncio.get_running_loop().create_task(write)
        writes.add(task)
        task.add_done_callback(writes.discard)

    async def paced(write: Any) -> None:
        # As few at once as Lapilli's writers take (its session loop's 16): left unbounded, a burst of them took
        # the client's connections and bind's Bindings queued behind them (the first runs of case 10 read no
        # faster than case 2 itself: bench/README, "Floors that keep Volcano's writes").
        async with gate:
            await write

    def write_status(meta: dict[str, Any], status: dict[str, Any], reason: str, message: str) -> None:
        in_background(paced(clients[0].patch_status(PODGROUPS, meta["name"], {"status": status}, meta["namespace"])))
        ref = {"apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind,
               "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]}}
        recorders[0].record(ref, "Warning" if reason == "Unschedulable" else "Normal", reason, message)

    def group_of(pod: dict[str, Any]) -> str | None:
        """The key of the PodGroup the pod names, once this watch has it."""
        key = f"{namespace_of(pod)}/{annotations_of(pod).get(GROUP_NAME_ANNOTATION)}"
        return key if GROUP_NAME_ANNOTATION in annotations_of(pod) and key in reflectors[1].store else None

    async def make_podgroup(pod: dict[str, Any]) -> None:
        # Volcano's PodGroup controller: a pod of its scheduler that names no PodGroup gets `podgroup-<uid>`,
        # owned by the pod, of one member.
        podgroup = {"apiVersion": PODGROUPS.api_version, "kind": PODGROUPS.kind, "metadata": {
            "name": podgroup_name_for(pod), "namespace": namespace_of(pod), "ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": name_of(pod), "uid": uid_of(pod), "controller": True}]},
            "spec": {"minMember": 1}}
        async with gate:
            created = await clients[0].create(PODGROUPS, podgroup, namespace_of(pod))
        key = key_of(pod)
        singles[key] = created["metadata"]
        if key in early:  # bound before its PodGroup was made
            early.discard(key)
            running(singles.pop(key))

    def member_seen(event: Event) -> None:
        if event.type != "ADDED":
            return
        if GROUP_NAME_ANNOTATION not in annotations_of(event.obj):
            in_background(make_podgroup(event.obj))
        elif (key := group_of(event.obj)) is not None and key not in bound:
            # Lapilli's sessions enqueue a PodGroup once its first member is there (the bench makes every PodGroup
            # before the clock starts, and their pods after): its writes fall in the timed window, so these do too.
            bound[key] = 0
            need = reflectors[1].store[key]["spec"]["minMember"]
            write_status(reflectors[1].store[key]["metadata"], {"phase": "Inqueue"}, "Unschedulable",
                         f"1/1 tasks in gang unschedulable: pod group is not ready, {need} minAvailable")

    def member_bound(namespace: str, name: str) -> None:
        pod = reflectors[0].store.get(f"{namespace}/{name}")
        key = group_of(pod) if pod is not None else None
        if key is not None:
            bound[key] = bound.get(key, 0) + 1
            if bound[key] != reflectors[1].store[key]["spec"]["minMember"]:
                return
            meta = reflectors[1].store[key]["metadata"]
        elif (meta := singles.pop(f"{namespace}/{name}", None)) is None:
            early.add(f"{namespace}/{name}")
            return
        running(meta)

    def running(meta: dict[str, Any]) -> None:
        scheduled = {"type": "Scheduled", "status": "True", "reason": "tasks in gang are ready to be scheduled",
                     "transitionID": "bench", "lastTransitionTime": rfc3339(time.time())}
        write_status(meta, {"phase": "Running", "conditions": [scheduled]}, "Scheduled", "pod group is ready")

    async def watch() -> None:
        # The kubeconfig comes before the CRDs (a 404 retried) and the case ends by stopping the API server (a cut
        # watch retried): neither is news here.
        logging.getLogger("lapilli").setLevel(logging.ERROR)
        path = Path(kubeconfig)
        while not path.exists():  # written once the cluster is up, after this server started
            await asyncio.sleep(0.1)
        if not clients:  # the one client bind uses too
            clients.append(KubeClient(load_kubeconfig(path)))
        reflectors.extend((Reflector(clients[0], PODS, handlers=[member_seen] if writing else []),
                           Reflector(clients[0], PODGROUPS)))
        recorders.append(EventRecorder(clients[0], "volcano"))
        for reflector in reflectors:
            reflector.start()

    async def filter_(request: web.Request) -> web.Response:
        names = orjson.loads(await request.read())["NodeNames"]
        if answer_one:
            names = names[:1]
        return web.Response(body=orjson.dumps({"NodeNames": names, "FailedNodes": {}, "Error": ""}),
                            content_type="application/json")

    async def prioritize(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b"[]", content_type="application/json")

    async def bind(request: web.Request) -> web.Response:
        args = orjson.loads(await request.read())
        if not clients:  # the kubeconfig exists once the cluster is up, after this server started
            clients.append(KubeClient(load_kubeconfig(kubeconfig)))
        await clients[0].bind(args["PodNamespace"], args["PodName"], args["Node"], uid=args["PodUID"])
        if writing:
            member_bound(args["PodNamespace"], args["PodName"])
        return web.Response(body=b'{"Error":""}', content_type="application/json")

    _serve_routes(port, ready, {"/extender/filter": filter_, "/extender/prioritize": prioritize,
                                "/extender/gang/bind": bind}, watch if watching else None)


def start_null_extender(state_dir: Path, answer: str = ECHO_NODES) -> tuple[Any, str]:
    """The do-nothing extender in a process of its own, serving once it has started; (process, its URL). It reads
    the kubeconfig the dev cluster will write in `state_dir` when its bind is first called (or, `WATCHING`, as soon
    as the file is there)."""
    from assembly.dev.ports import free_ports

    [port] = free_ports(1)
    ready = mp.get_context("spawn").Event()
    args = (port, str(state_dir / "kubeconfig"), ready, answer != ECHO_NODES, answer in (WATCHING, WRITING),
            answer == WRITING)
    null = mp.get_context("spawn").Process(target=serve_null_extender, args=args, daemon=True)
    null.start()
    ready.wait(60)
    return null, f"http://127.0.0.1:{port}/extender"


@dataclass(frozen=True)
class CaseResult:
    """One throughput case's run. Per pod: `cpu`, CPU milliseconds of each process while the pods were created and
    bound; `requests`, kube-apiserver's writes and webhook calls (`_api_counts`) until the last PodGroup says
    Running, and its reads (GET, LIST) until the last pod was bound; `service`, how the service's filter answered
    pods without a plan and its calls per verb (`_service_counts`; empty for other extenders); `connections`, TCP
    connections the machine accepted while the pods were created and bound."""

    pods_per_s: float
    cpu: dict[str, float]
    requests: dict[str, float]
    service: dict[str, float]
    connections: float
    bound_at: list[float]  # seconds from the first create at which each pod was first seen bound, in order
    created_s: float  # seconds from the first create to the last create's answer

    def at(self, share: float) -> float:
        """When `share` of the pods were bound (seconds from the first create)."""
        return self.bound_at[max(0, min(len(self.bound_at), round(share * len(self.bound_at))) - 1)]


async def _throughput_case(
    nodes: int, pods: int, extender: bool, gang: int, scheduler: str, serve_args: tuple[str, ...] = (),
    null_extender: str = "", extender_tls: bool = False, mixed: bool = False,
) -> CaseResult:
    from assembly.dev import ClusterSpec, DevCluster, NodeShape
    from lapilli.kube.resources import PODGROUPS, PODS

    with tempfile.TemporaryDirectory() as tmp:
        null, url = start_null_extender(Path(tmp), null_extender) if null_extender else (None, None)
        spec = ClusterSpec(state_dir=Path(tmp), nodes=nodes, shape=NodeShape(cpu="64", memory="512Gi", gpus=8),
                           extender=extender, kubelet="none", tie_to_parent=True, serve_args=serve_args,
                           extender_url=url, extender_over_tls=extender_tls)
        cluster = DevCluster(spec)
        await cluster.up()
        try:
            client = cluster.client
            assert client is not None
            await cluster.ensure_namespace("bench")
            await asyncio.sleep(SETTLE_S)
            sem = asyncio.Semaphore(64)

            async def create(res: Any, obj: dict[str, Any]) -> None:
                async with sem:
                    await client.create(res, obj, "bench")

            # `mixed`: the odd groups of `gang` pods are single pods instead.
            gangs = [g for g in range(pods // gang) if not (mixed and g % 2)] if gang > 1 else []
            groups = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                       "metadata": {"name": f"g{g}", "namespace": "bench"}, "spec": {"minMember": gang}}
                      for g in gangs]
            await asyncio.gather(*(create(PODGROUPS, g) for g in groups))
            # Bound pods are counted from a watch opened before the first create: polling with LISTs would load
            # kube-apiserver in proportion to how long a case runs, penalising the slower case twice.
            listed = await client.list(PODS, "bench")
            everyone_bound: asyncio.Future[float] = asyncio.get_running_loop().create_future()

            bound_at: list[float] = []

            async def count_bound() -> None:
                bound: set[str] = set()
                async for event in client.watch(PODS, "bench", resource_version=listed.resource_version,
                                                timeout_seconds=600, allow_bookmarks=False):
                    name = event.object["metadata"]["name"]
                    if (event.object.get("spec") or {}).get("nodeName") and name not in bound:
                        bound.add(name)
                        bound_at.append(time.perf_counter() - start)
                        if len(bound) >= pods:
                            everyone_bound.set_result(time.perf_counter())
                            return

            watcher = asyncio.create_task(count_bound())
            counts_before = await _api_counts(client)
            cpu_before, opened_before = cpu_by_role(), tcp_connections_opened()
            start = time.perf_counter()
            docs = []
            for i in range(pods):
                member = gang > 1 and not (mixed and (i // gang) % 2)
                annotations = {"scheduling.k8s.io/group-name": f"g{i // gang}"} if member else {}
                docs.append({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": f"p{i}", "namespace": "bench", "annotations": annotations},
                             "spec": {"schedulerName": scheduler, "containers": [{
                                 "name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                                               "limits": {"nvidia.com/gpu": "1"}}}]}})
            await asyncio.gather(*(create(PODS, d) for d in docs))
            created = time.perf_counter() - start
            try:
                done = await asyncio.wait_for(asyncio.shield(everyone_bound), timeout=600)
            except TimeoutError:
                raise RuntimeError(f"not every pod was bound after 600 s ({pods} created)") from None
            finally:
                watcher.cancel()
            cpu = {name: 1000 * (used - cpu_before.get(name, 0.0)) / pods for name, used in cpu_by_role().items()}
            opened = (tcp_connections_opened() - opened_before) / pods
            # Reads are taken while the pods were created and bound: the wait below polls PodGroups itself.
            counts_bound = await _api_counts(client)
            # The writes that follow a bind (a pod's PodGroup made and its status Running) land after the clock
            # stops: the counters are read once every PodGroup of the case says Running (or after WRITES_SETTLE_S).
            if ((extender and not null_extender and "--disable-controllers" not in serve_args)
                    or null_extender == WRITING):
                singles = pods - gang * len(gangs) if gang > 1 else pods  # each given a PodGroup of its own
                await _podgroups_running(client, len(gangs) + singles)
            await asyncio.sleep(WRITES_QUIET_S)
            counts_after = await _api_counts(client)
            counts = {what: (n - counts_before.get(what, 0.0)) / pods for what, n in counts_after.items()
                      if not _is_read(what)}
            counts |= {what: (n - counts_before.get(what, 0.0)) / pods for what, n in counts_bound.items()
                       if _is_read(what) and what.split(" ", 1)[1]}
            service = await _service_counts(cluster) if extender and not null_extender else {}
            return CaseResult(pods / (done - start), cpu, {what: n for what, n in counts.items() if n >= 0.005},
                              {what: n / pods for what, n in service.items()}, opened, bound_at, created)
        finally:
            await cluster.down()
            if null is not None:
                null.terminate()


SETTLE_S = 3.0  # after `up`: the service's caches have just synced and its first sessions are running
WRITES_SETTLE_S = 120.0  # at most this long after the last bind for every PodGroup to say Running
WRITES_QUIET_S = 2.0  # and this long after that before the API server's counters are read again


async def _podgroups_running(client: Any, expected: int) -> None:
    from lapilli.kube.resources import PODGROUPS

    deadline = time.perf_counter() + WRITES_SETTLE_S
    while time.perf_counter() < deadline:
        listed = await client.list(PODGROUPS, "bench")
        if sum((pg.get("status") or {}).get("phase") == "Running" for pg in listed.items) >= expected:
            return
        await asyncio.sleep(0.5)
    print(f"  (not every PodGroup Running {WRITES_SETTLE_S:.0f} s after the last bind)", flush=True)


def throughput(nodes: int, pods: int, only: list[int] | None = None, repeat: int = 1) -> None:
    # The service's extender port is plain HTTP on loopback, as the shipped pod runs it (kube-scheduler beside the
    # service, manifests/), and as the do-nothing extender is served; case 6 is case 2 over TLS with kube-scheduler's
    # client certificate, what an install whose kube-scheduler runs elsewhere pays (and what cases 2-4 measured
    # before 2026-11-26's issue 19 round).
    cases: list[tuple[str, bool, int, str, tuple[str, ...], str, bool, bool]] = [
        ("plain kube-scheduler, single pods", False, 1, "default-scheduler", (), "", False, False),
        ("with the extender, single pods", True, 1, "volcano", (), "", False, False),
        ("with the extender, gangs of 8", True, 8, "volcano", (), "", False, False),
        # Separates the extender's own cost from the PodGroup controller's per-pod writes.
        ("extender, single pods, no controllers", True, 1, "volcano", ("--disable-controllers",), "", False, False),
        # The floor for any extender here: the protocol's hops with no scheduling work and no Lapilli service. Its
        # pods name the profile the extender entries serve (the dev cluster gives default-scheduler a kube-scheduler
        # of its own, without extenders, since acf2fee).
        ("do-nothing extender, single pods", False, 1, "volcano", (), ECHO_NODES, False, False),
        ("extender over TLS, single pods", True, 1, "volcano", (), "", True, False),
        # The floor for a pod the extender has planned (Lapilli's gang members and its planned single pods): filter
        # answers one node, so kube-scheduler neither scores nor calls prioritize; only filter and bind are paid.
        ("do-nothing extender, one node answered", False, 1, "volcano", (), ONE_NODE, False, False),
        # Case 7 for gangs of 8 (their PodGroups made, members annotated) with a watch of every pod and PodGroup
        # kept in memory: the floor for any scheduler that must know a gang's members to plan it.
        ("do-nothing, one node, watching, gangs of 8", False, 8, "volcano", (), WATCHING, False, False),
        # Case 8 with the PodGroup writes and Events Volcano's semantics ask of each gang (Inqueue, then Running once
        # its members are bound; an Unschedulable and a Scheduled Event): the floor for a scheduler that must also
        # keep Volcano's observable behaviour, as issue 19 asks.
        ("do-nothing, watching, Volcano's writes, gangs of 8", False, 8, "volcano", (), WRITING, False, False),
        # Case 7 with the watch and Volcano's writes for a pod of no PodGroup (its PodGroup made, then its status
        # Running and a Scheduled Event once bound): the floor for case 2, less the PodGroup's two webhook calls.
        ("do-nothing, watching, Volcano's writes, single pods", False, 1, "volcano", (), WRITING, False, False),
        # A cluster shared by both kinds, as a lab's is: every other group of 8 pods a gang, the rest single pods,
        # created together. What the sessions plan and what filter places without a plan take room from each other.
        ("with the extender, gangs of 8 and single pods", True, 8, "volcano", (), "", False, True),
    ]
    chosen = [case for number, case in enumerate(cases, 1) if not only or number == 1 or number in only]
    # Cases take turns, `repeat` rounds, so a slow minute on this shared machine hits every case alike; the
    # plain baseline always runs, since every ratio is taken against it in the same run.
    rates: dict[str, list[float]] = {case[0]: [] for case in chosen}
    cpu_per_pod: dict[str, list[float]] = {case[0]: [] for case in chosen}
    for _ in range(repeat):
        for label, extender, gang, scheduler, serve_args, null, tls, mixed in chosen:
            result = asyncio.run(_throughput_case(nodes, pods, extender, gang, scheduler, serve_args, null, tls,
                                                  mixed))
            rates[label].append(result.pods_per_s)
            cpu_per_pod[label].append(sum(result.cpu.values()))
            spent = ", ".join(f"{name} {ms:.2f}" for name, ms in sorted(result.cpu.items(), key=lambda kv: -kv[1]))
            print(f"{label:<40} {result.pods_per_s:8.1f} pods/s   CPU ms/pod {sum(result.cpu.values()):.1f}: "
                  f"{spent}", flush=True)
            reads = {what: n for what, n in result.requests.items() if _is_read(what)}
            writes = {what: n for what, n in result.requests.items() if what not in reads}
            for title, counted in (("API writes/pod", writes), ("API reads/pod", reads)):
                total = sum(n for what, n in counted.items() if not what.startswith("webhook"))
                listed = ", ".join(f"{what} {n:.2f}" for what, n in sorted(counted.items(), key=lambda kv: -kv[1]))
                print(f"{'':<40} {title} {total:.2f}" + (f": {listed}" if listed else ""), flush=True)
            if result.service:
                answers = ", ".join(f"{what} {n:.2f}" for what, n in sorted(result.service.items()))
                print(f"{'':<40} filter answers and verb calls/pod: {answers}", flush=True)
            print(f"{'':<40} TCP connections accepted/pod: {result.connections:.2f}", flush=True)
            # Creates and binds overlap: where the bound curve follows the creates, the case waited for its pods.
            print(f"{'':<40} all created at {result.created_s:.2f} s; bound: first at {result.bound_at[0]:.2f} s, "
                  + ", ".join(f"{share:.0%} at {result.at(share):.2f} s" for share in (0.1, 0.5, 0.9, 1.0)),
                  flush=True)
    medians = {label: statistics.median(values) for label, values in rates.items()}
    base = medians[chosen[0][0]]
    print(f"medians of {repeat} round(s):")
    for label, values in rates.items():
        ratio = "" if label == chosen[0][0] else f"  {medians[label] / base:.2f}x plain"
        runs = ", ".join(f"{v:.0f}" for v in values)
        cpu = statistics.median(cpu_per_pod[label])
        print(f"  {label:<40} {medians[label]:8.1f} pods/s{ratio}   CPU {cpu:.1f} ms/pod   (runs: {runs})")


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    lat.add_argument("--requests", type=int, default=2000)
    lat.add_argument("--vgpu", action="store_true", help="shared GPU cards next to whole GPUs (issue 18)")
    thr = sub.add_parser("throughput")
    thr.add_argument("--nodes", type=int, default=500)
    thr.add_argument("--pods", type=int, default=800)
    thr.add_argument("--cases", type=int, nargs="*", help="case numbers to run (1, the baseline, always runs)")
    thr.add_argument("--repeat", type=int, default=1, help="rounds over the cases; medians are reported")
    args = parser.parse_args()
    if args.what == "latency" and args.vgpu:
        latency_vgpu(args.nodes, args.requests)
    elif args.what == "latency":
        latency(args.nodes, args.requests)
    else:
        throughput(args.nodes, args.pods, args.cases, args.repeat)


if __name__ == "__main__":
    main()
