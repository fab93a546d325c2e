"""Hostile bodies for both faces of the service, and a harness that sends them to the real aiohttp apps.

A bounded, deterministic generator (`cases`): for every extender verb and every admission path, valid seeds are
broken in each way issue 12 lists — malformed JSON, every field of the seed replaced by a value of each wrong
type, huge lists (100k node names, victims, tasks), 10 MB bodies, deep nesting, wrong content types, `.`/`..`
names, empty UIDs. `Harness` serves the extender (over a small cluster state with its session run) and the
webhook (over in-memory listers) on loopback TCP, sends each case with a real client, and tallies what came back:
5xx answers, exceptions the server logged, hangs (no answer within the client timeout), answers whose reason is not
one line, the slowest answer and the process's peak RSS. tests/fuzz runs a bounded sample of it; bench/fuzz.py the
whole corpus, with the counts recorded in bench/README.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import random
import resource
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from extender.service.http import make_app as extender_app
from tests.service.extender_state import make_extender, volcano_pod
from tests.service.reviews import hypernode, job, pod, podgroup, queue, review, task, training_job
from tests.unit.extender.engine.builders import node
from tests.unit.extender.engine.builders import podgroup as engine_podgroup
from tests.unit.extender.engine.builders import queue as engine_queue
from webhook.context import AdmissionContext
from webhook.listers import MemoryHyperNodes, MemoryJobs, MemoryNamespaces, MemoryQueues
from webhook.metrics import WebhookMetrics
from webhook.routes import ROUTES
from webhook.server import INTERNAL_ERROR
from webhook.server import make_app as webhook_app

JSON = "application/json"
WRONG_VALUES: tuple[Any, ...] = (None, 0, -1, 1.5, True, "x", "", "..", [], {}, [1, "a"], {"a": {"b": 1}}, 2**70)
CONTENT_TYPES = ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "application/yaml", "")
HUGE = 100_000
TEN_MB = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Case:
    face: str  # "extender" or "webhook"
    path: str
    category: str
    body: bytes
    content_type: str = JSON
    method: str = "POST"


# ---- seeds -----------------------------------------------------------------------------------------------------

def _cluster() -> list[dict[str, Any]]:
    docs = [node({"name": f"n{i}", "alloc": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": "2"}}) for i in range(4)]
    docs += [engine_queue({"name": "default"}), engine_podgroup({"name": "ml/g", "min": 2, "phase": "Inqueue"})]
    docs += [volcano_pod({"name": f"ml/g-w-{i}", "group": "g", "req": {"cpu": "1", "nvidia.com/gpu": "1"}})
             for i in range(2)]
    docs.append(volcano_pod({"name": "ml/solo", "req": {"cpu": "1"}}))
    docs.append(volcano_pod({"name": "ml/run", "req": {"cpu": "1"}, "node": "n0", "phase": "Running"}))
    return docs


def _extender_pod() -> dict[str, Any]:
    doc = volcano_pod({"name": "ml/g-w-0", "group": "g", "req": {"cpu": "1", "nvidia.com/gpu": "1"},
                       "tolerations": [{"key": "k", "operator": "Exists"}], "nodeSelector": {"a": "b"},
                       "labels": {"app": "x"}, "priorityClassName": "high"})
    doc["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]}}}
    doc["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    doc["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    doc["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "2"}}}]
    doc["spec"]["overhead"] = {"cpu": "10m"}
    doc["status"]["nominatedNodeName"] = "n1"
    return doc


def extender_seeds() -> list[tuple[str, dict[str, Any]]]:
    names = ["n0", "n1", "n2", "n3"]
    member = _extender_pod()
    nodes_form = {"metadata": {}, "items": [{"metadata": {"name": n}, "status": {}} for n in names]}
    return [
        ("/extender/filter", {"Pod": member, "Nodes": None, "NodeNames": names}),
        ("/extender/filter", {"Pod": member, "Nodes": nodes_form, "NodeNames": None}),
        ("/extender/prioritize", {"Pod": member, "Nodes": None, "NodeNames": names}),
        ("/extender/preempt", {"Pod": volcano_pod({"name": "ml/solo", "req": {"cpu": "1"}}), "NodeNameToVictims": None,
                               "NodeNameToMetaVictims": {"n0": {"Pods": [{"UID": "ml-run"}], "NumPDBViolations": 0}}}),
        ("/extender/preempt", {"Pod": member, "NodeNameToMetaVictims": None, "NodeNameToVictims": {
            "n0": {"Pods": [volcano_pod({"name": "ml/run", "node": "n0"})], "NumPDBViolations": 1}}}),
        ("/extender/gang/bind", {"PodName": "solo", "PodNamespace": "ml", "PodUID": "ml-solo", "Node": "n1"}),
    ]


def _admission_context() -> AdmissionContext:
    queues = [queue("default"), queue("root"), queue("eng", parent="root", capability={"cpu": "8"}),
              queue("closed", state="Closed")]
    jobs = [training_job(), job("pt", task("master", 1), task("worker", 2), plugins={"pytorch": [], "svc": []})]
    namespaces = [{"metadata": {"name": "ml", "annotations": {"scheduling.volcano.sh/queue-name": "eng"}}}]
    hypernodes = [hypernode("leaf-0", 1, ("Node", "n0")), hypernode("spine-0", 2, ("HyperNode", "leaf-0"))]
    return AdmissionContext(queues=MemoryQueues(queues), jobs=MemoryJobs(jobs), namespaces=MemoryNamespaces(namespaces),
                            hypernodes=MemoryHyperNodes(hypernodes))


def webhook_seeds() -> list[tuple[str, dict[str, Any]]]:
    job_pod = pod("train-worker-1", "ml", annotations={"volcano.sh/job-name": "train",
                                                        "volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1"})
    objects = {"Job": training_job(), "Queue": queue("eng-b", parent="eng", deserved={"cpu": "2"}),
               "PodGroup": podgroup(), "Pod": job_pod,
               "HyperNode": hypernode("spine-1", 2, ("HyperNode", "leaf-1"), ("Node", "n1"))}
    seeds = []
    for route in ROUTES:
        obj = objects[route.target.kind]
        for op in route.operations:
            old = copy.deepcopy(obj) if op != "CREATE" else None
            seeds.append((route.path, review(None if op == "DELETE" else obj, op, old=old)))
    return seeds


# ---- breaking seeds --------------------------------------------------------------------------------------------

def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _paths(child, (*prefix, i))


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return out


def _json_with_bigints(doc: Any) -> bytes:  # beyond 64 bits, as Go never sends but a hostile client may
    import json

    return json.dumps(doc).encode()


def _name_fields(face: str, doc: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Paths of the names and UIDs a seed carries, for the `.`/`..` and empty-UID cases."""
    for path in _paths(doc):
        if path and path[-1] in ("name", "namespace", "PodName", "PodNamespace", "Node", "nodeName", "uid", "UID",
                                 "PodUID", "schedulerName", "queue"):
            yield path, str(path[-1])


def _broken(face: str, path: str, seed: dict[str, Any], rng: random.Random) -> Iterator[Case]:
    raw = orjson.dumps(seed)
    # Malformed JSON.
    for body in (raw[: len(raw) // 2], raw[:1], raw + b"}", b"", b"null", b"[]", b"1", b'"s"', b"{\xff}",
                 b"{'a': 1}", b"NaN", raw.replace(b":", b"=", 1), bytes(rng.randrange(256) for _ in range(64))):
        yield Case(face, path, "malformed JSON", body)
    # Wrong types in every field.
    for where in _paths(seed):
        for value in WRONG_VALUES:
            doc = _replaced(seed, where, value)
            body = _json_with_bigints(doc) if isinstance(value, int) and value >= 2**63 else orjson.dumps(doc)
            yield Case(face, path, "wrong type", body)
    # Names and UIDs.
    for where, key in _name_fields(face, seed):
        for value in (".", "..", "../../nodes/x", "", "a/b", "x" * 300, "UPPER", "名前"):
            if key in ("uid", "UID", "PodUID") and value not in ("", ".."):
                continue
            yield Case(face, path, "names and uids", orjson.dumps(_replaced(seed, where, value)))
    # Wrong content types.
    for content_type in CONTENT_TYPES:
        yield Case(face, path, "content type", raw, content_type)
    yield Case(face, path, "method", b"", method="GET")
    # Deep nesting: past the JSON parser's limit, and just under it inside a field.
    yield Case(face, path, "deep nesting", b"[" * 100_000 + b"]" * 100_000)
    nested: Any = "leaf"
    for _ in range(200):  # orjson writes no deeper than 254
        nested = {"a": nested}
    for where in list(_paths(seed))[1:4]:
        yield Case(face, path, "deep nesting", orjson.dumps(_replaced(seed, where, nested)))
    key = next(iter(seed))
    yield Case(face, path, "deep nesting", b'{"%s":' % key.encode() + b'{"a":' * 5000 + b"1" + b"}" * 5001)
    # 10 MB: one huge string, and past the body limit.
    for where in list(_paths(seed))[1:3]:
        yield Case(face, path, "10 MB body", orjson.dumps(_replaced(seed, where, "x" * TEN_MB)))


def _huge(face: str, path: str, seed: dict[str, Any]) -> Iterator[Case]:
    names = [f"node-{i:06d}" for i in range(HUGE)]
    if path in ("/extender/filter", "/extender/prioritize"):
        yield Case(face, path, "huge lists", orjson.dumps({**seed, "NodeNames": names, "Nodes": None}))
        items = [{"metadata": {"name": n}} for n in names]
        yield Case(face, path, "huge lists", orjson.dumps({**seed, "NodeNames": None, "Nodes": {"items": items}}))
        pod_doc = copy.deepcopy(seed["Pod"])
        pod_doc["spec"]["containers"] = [copy.deepcopy(pod_doc["spec"]["containers"][0]) for _ in range(20_000)]
        pod_doc["metadata"]["annotations"] = {f"k{i}": "v" for i in range(HUGE)}
        yield Case(face, path, "huge lists", orjson.dumps({**seed, "Pod": pod_doc}))
    elif path == "/extender/preempt":
        victims = {n: {"Pods": [{"UID": f"u{i}"}], "NumPDBViolations": 0} for i, n in enumerate(names)}
        yield Case(face, path, "huge lists", orjson.dumps({**seed, "NodeNameToMetaVictims": victims}))
        many = {"n0": {"Pods": [{"UID": f"u{i}"} for i in range(HUGE)], "NumPDBViolations": 0}}
        yield Case(face, path, "huge lists", orjson.dumps({**seed, "NodeNameToMetaVictims": many}))
    elif path == "/extender/gang/bind":
        yield Case(face, path, "huge lists", orjson.dumps({**seed, "PodName": names}))
    elif seed.get("request", {}).get("object") is not None:
        obj = seed["request"]["object"]
        big = copy.deepcopy(obj)
        big.setdefault("metadata", {})["labels"] = {f"k{i}": "v" for i in range(HUGE)}
        yield Case(face, path, "huge lists", orjson.dumps(_replaced(seed, ("request", "object"), big)))
        if obj.get("kind") == "Job":
            tasks = copy.deepcopy(obj)
            tasks["spec"]["tasks"] = [task(f"t{i}", 1) for i in range(10_000)]
            yield Case(face, path, "huge lists", orjson.dumps(_replaced(seed, ("request", "object"), tasks)))
    yield Case(face, path, "10 MB body", orjson.dumps({"pad": "x" * TEN_MB, **seed}))


HEAVY = ("huge lists", "10 MB body", "deep nesting")


def iter_cases(seed: int = 12) -> Iterator[Case]:
    """Every hostile case, deterministic, made as it is sent (the 10 MB ones are not all held at once)."""
    rng = random.Random(seed)
    for face, seeds in (("extender", extender_seeds()), ("webhook", webhook_seeds())):
        for path, doc in seeds:
            yield from _broken(face, path, doc, rng)
        for path in dict.fromkeys(p for p, _ in seeds):
            yield from _huge(face, path, next(d for p, d in seeds if p == path))


def sample(light: int, heavy: int, seed: int = 12) -> list[Case]:
    """A bounded sample for the test tier: `light` cases spread over every path and category, `heavy` of the
    huge/10 MB/deeply nested ones (every extender verb and admission path keeps its malformed-JSON cases)."""
    rng = random.Random(seed)
    everything = [c for c in iter_cases(seed) if c.category not in HEAVY or len(c.body) < 2 * TEN_MB]
    big = [c for c in everything if c.category in HEAVY]
    small = [c for c in everything if c.category not in HEAVY]
    return rng.sample(small, min(light, len(small))) + rng.sample(big, min(heavy, len(big)))


# ---- harness ---------------------------------------------------------------------------------------------------

@dataclass
class Tally:
    sent: int = 0
    by_status: Counter[int] = field(default_factory=Counter)
    by_category: Counter[str] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)  # 5xx answers and exceptions the server logged
    hangs: list[str] = field(default_factory=list)
    not_one_line: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    slowest: str = ""
    peak_rss_mb: float = 0.0

    def summary(self) -> str:
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(self.by_status.items()))
        return (f"{self.sent} requests ({statuses}); 5xx or crashes {len(self.server_errors)}, hangs "
                f"{len(self.hangs)}, reasons not one line {len(self.not_one_line)}; slowest answer "
                f"{self.slowest_s * 1000:.0f} ms ({self.slowest}); peak RSS {self.peak_rss_mb:.0f} MB")


class _Crashes(logging.Handler):
    """Exceptions aiohttp or a handler logged while answering (a crash that still produced an answer)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.name}: {record.getMessage()[:200]}")


def _reason_lines(face: str, status: int, body: bytes) -> list[str]:
    """The reasons an answer gives (every one must be one line)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return [body.decode(errors="replace")]
    if not isinstance(doc, dict):
        return []
    reasons: list[Any] = []
    if face == "extender":
        reasons += [doc.get("Error") or ""]
        reasons += list((doc.get("FailedNodes") or {}).values())[:3]
    else:
        response = doc.get("response") or {}
        reasons.append(((response.get("status") or {}).get("message")) or "")
        reasons.append(doc.get("message") or "")
    return [str(r) for r in reasons if r]


class Harness:
    """Both faces served on loopback; `await send_all(cases)` returns the tally. The extender writes through
    `client` (say, one whose binds fail)."""

    def __init__(self, timeout_s: float = 15.0, client: Any = None) -> None:
        self.timeout_s = timeout_s
        self.client = client  # the extender's write client (a recording stand-in by default)
        self._runners: list[web.AppRunner] = []
        self.urls: dict[str, str] = {}

    async def __aenter__(self) -> Harness:
        extender = make_extender(_cluster(), self.client)
        await extender.loop.run_once()
        apps = {"extender": extender_app(extender, lambda: True, lambda: True),
                "webhook": webhook_app(_admission_context(), WebhookMetrics(_registry()))}
        for face, app in apps.items():
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self._runners.append(runner)
            self.urls[face] = f"http://127.0.0.1:{runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for runner in self._runners:
            await runner.cleanup()

    async def send_all(self, batch: Iterable[Case]) -> Tally:
        tally = Tally()
        crashes = _Crashes()
        logging.getLogger().addHandler(crashes)
        try:
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            async with aiohttp.ClientSession(timeout=timeout) as http:
                for case in batch:
                    await self._send(http, case, tally, crashes)
        finally:
            logging.getLogger().removeHandler(crashes)
        tally.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return tally

    async def _send(self, http: aiohttp.ClientSession, case: Case, tally: Tally, crashes: _Crashes) -> None:
        label = f"{case.face} {case.path} [{case.category}] {case.body[:80]!r}"
        headers = {"Content-Type": case.content_type} if case.content_type else {}
        before = len(crashes.records)
        started = time.perf_counter()
        tally.sent += 1
        tally.by_category[case.category] += 1
        try:
            async with http.request(case.method, self.urls[case.face] + case.path, data=case.body,
                                    headers=headers) as resp:
                status, body = resp.status, await resp.read()
        except TimeoutError:
            tally.hangs.append(label)
            return
        except aiohttp.ClientError as exc:  # the server dropped the connection: a crash as the client sees it
            tally.server_errors.append(f"{label}: {type(exc).__name__}: {exc}")
            return
        elapsed = time.perf_counter() - started
        if elapsed > tally.slowest_s:
            tally.slowest_s, tally.slowest = elapsed, f"{case.face} {case.path} [{case.category}]"
        tally.by_status[status] += 1
        if status >= 500:
            tally.server_errors.append(f"{label}: HTTP {status}: {body[:200]!r}")
        elif len(crashes.records) > before:
            tally.server_errors.append(f"{label}: logged {crashes.records[before]}")
        elif case.face == "webhook" and INTERNAL_ERROR.encode() in body:
            tally.server_errors.append(f"{label}: a rule failed: {body[:200]!r}")
        for reason in _reason_lines(case.face, status, body):
            if "\n" in reason.strip() or len(reason) > 2000:
                tally.not_one_line.append(f"{label}: {reason[:200]!r}")
                break


def _registry() -> Any:
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


def run(batch: Iterable[Case]) -> Tally:
    async def main() -> Tally:
        async with Harness() as harness:
            return await harness.send_all(batch)

    return asyncio.run(main())
