"""Property: whatever arrives at an admission path, the service answers well-formed JSON, never a 5xx, and
echoes the request's uid when one was given; no rule ever fails (which would show as an internal-error denial).

Valid reviews of every kind (Job, Queue, PodGroup, Pod, HyperNode; CREATE/UPDATE/DELETE) are mutated by hypothesis: a
field replaced by arbitrary JSON, a field deleted, the body truncated or spliced, the content type changed.
"""

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from tests.service.reviews import hypernode, job, pod, podgroup, queue, review, task, training_job
from webhook.context import AdmissionContext
from webhook.listers import MemoryHyperNodes, MemoryJobs, MemoryNamespaces, MemoryQueues
from webhook.metrics import WebhookMetrics
from webhook.routes import ROUTES
from webhook.server import INTERNAL_ERROR, make_app

QUEUES = [
    queue("default"),
    queue("root"),
    queue("ml-training"),
    queue("closed", state="Closed"),
    queue("eng", parent="root", capability={"cpu": "8"}, deserved={"cpu": "4"}),
    queue("eng-a", parent="eng", capability={"cpu": "4"}),
    queue("eng-b", parent="eng"),
]
TRAIN = training_job()
CTX = AdmissionContext(
    queues=MemoryQueues(QUEUES),
    jobs=MemoryJobs([TRAIN, job("pt", task("master", 1), task("worker", 2), plugins={"pytorch": [], "svc": []})]),
    namespaces=MemoryNamespaces(
        [{"metadata": {"name": "ns1", "annotations": {"scheduling.volcano.sh/queue-name": "eng-a"}}}]
    ),
    hypernodes=MemoryHyperNodes([hypernode("leaf-0", 1, ("Node", "n0")), hypernode("leaf-1", 1, ("Node", "n1")),
                                 hypernode("spine-0", 2, ("HyperNode", "leaf-0"))]),
)
SPINE = hypernode("spine-1", 2, ("HyperNode", "leaf-1"), ("HyperNode", "leaf-2"))
SPINE["spec"]["members"].append({"type": "Node", "selector": {"labelMatch": {
    "matchLabels": {"rack": "r1"}, "matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}}})
SPINE["spec"]["members"].append({"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}})
JOB_POD = pod(
    "train-worker-1",
    "ml",
    annotations={"volcano.sh/job-name": "train", "volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1"},
)

SEEDS: list[tuple[str, dict[str, Any]]] = []
for _route in ROUTES:
    _kind = _route.target.kind
    _obj = {
        "Job": TRAIN,
        "Queue": queue("eng-b", parent="eng", deserved={"cpu": "2"}),
        "PodGroup": podgroup(),
        "Pod": JOB_POD,
        "HyperNode": SPINE,
    }[_kind]
    for _op in _route.operations:
        old = copy.deepcopy(_obj) if _op != "CREATE" else None
        SEEDS.append((_route.path, review(None if _op == "DELETE" else _obj, _op, old=old)))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every container path in `value` (dict keys and list indexes), shallow ones first."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from paths(child, (*prefix, i))


def replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return doc


def delete(doc: Any, path: tuple) -> Any:
    if not path:
        return {}
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return doc


@st.composite
def requests(draw) -> tuple[str, bytes, str, str]:
    """(path, body, content type, the uid the body carries or "")."""
    path, seed = draw(st.sampled_from(SEEDS))
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        candidates = list(paths(doc))
        in_object = [p for p in candidates if p[:2] in (("request", "object"), ("request", "oldObject"))]
        # Mostly damage the reviewed object (that is what reaches the rules); sometimes the envelope.
        where = draw(st.sampled_from(in_object if in_object and draw(st.integers(0, 4)) else candidates))
        if draw(st.booleans()):
            doc = replace(doc, where, draw(json_values))
        else:
            doc = delete(doc, where)
    body = orjson.dumps(doc)
    damage = draw(st.sampled_from(["none", "none", "none", "truncate", "splice"]))
    if damage == "truncate":
        body = body[: draw(st.integers(0, len(body)))]
    elif damage == "splice":
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.binary(max_size=8)) + body[at:]
    content_type = draw(st.sampled_from(["application/json"] * 4 + ["text/plain", "application/json; charset=utf-8"]))
    return path, body, content_type, uid_in(body)


def uid_in(body: bytes) -> str:
    """The uid a reader of `body` can find ("" when it is not JSON or carries none)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ""
    request = doc.get("request") if isinstance(doc, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


@pytest.fixture(scope="module")
def service():
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(make_app(CTX, WebhookMetrics(CollectorRegistry()))), loop=loop)
    loop.run_until_complete(client.start_server())
    yield loop, client
    loop.run_until_complete(client.close())
    loop.close()


def test_seeds_are_admitted(service):
    loop, client = service
    for path, seed in SEEDS:
        status, body = loop.run_until_complete(_post(client, path, orjson.dumps(seed), "application/json"))
        assert status == 200, (path, body)
        assert body["response"]["allowed"] is True, (path, seed["request"]["operation"], body)


async def _post(client: TestClient, path: str, body: bytes, content_type: str) -> tuple[int, Any]:
    resp = await client.post(path, data=body, headers={"Content-Type": content_type})
    return resp.status, orjson.loads(await resp.read())


@settings(
    max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(request=requests())
def test_any_input_gets_json_never_a_5xx(service, request):
    loop, client = service
    path, body, content_type, uid = request
    status, answer = loop.run_until_complete(_post(client, path, body, content_type))
    event(f"HTTP {status}" + (f" allowed={answer['response']['allowed']}" if status == 200 else ""))
    assert status < 500
    assert isinstance(answer, dict)
    if status == 200:
        assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
        response = answer["response"]
        assert response["uid"] == uid and uid
        assert isinstance(response["allowed"], bool)
        assert INTERNAL_ERROR not in (response.get("status") or {}).get("message", "")
    else:
        assert 400 <= status < 500
        assert isinstance(answer["error"], str) and "\n" not in answer["error"]
        if uid:
            assert answer.get("uid") == uid
