"""The admission face over HTTP (aiohttp test server): every path, denials, and every kind of bad input."""

import base64

import jsonpatch
import orjson
import pytest
from prometheus_client import CollectorRegistry

from tests.service.reviews import hypernode, job, pod, podgroup, queue, review, task
from webhook.context import AdmissionContext
from webhook.listers import MemoryJobs, MemoryNamespaces, MemoryQueues
from webhook.metrics import WebhookMetrics
from webhook.server import MAX_BODY, make_app

QUEUES = [queue("default"), queue("root"), queue("closed", state="Closed"), queue("team", parent="root")]
JOBS = [job("pt", task("master", 1), task("worker", 2), plugins={"env": []})]
# Fixtures run on the session loop (pyproject: asyncio_default_fixture_loop_scope); so must the tests using them.
pytestmark = pytest.mark.asyncio(loop_scope="session")

CTX = AdmissionContext(queues=MemoryQueues(QUEUES), jobs=MemoryJobs(JOBS), namespaces=MemoryNamespaces())


@pytest.fixture
def registry():
    return CollectorRegistry()


@pytest.fixture
async def client(aiohttp_client, registry):
    return await aiohttp_client(make_app(CTX, WebhookMetrics(registry)))


async def post(client, path, body, content_type="application/json"):
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    resp = await client.post(path, data=data, headers={"Content-Type": content_type})
    return resp.status, orjson.loads(await resp.read())


JOB_POD = pod(
    "pt-worker-1",
    annotations={"volcano.sh/job-name": "pt", "volcano.sh/task-spec": "worker", "volcano.sh/task-index": "1"},
)

ALLOWED = [
    ("/jobs/mutate", job("j")),
    ("/jobs/validate", job("j", task("w", 1, minAvailable=1), queue="default", minAvailable=1)),
    ("/queues/mutate", queue("q", state=None)),
    ("/queues/validate", queue("q")),
    ("/podgroups/mutate", podgroup("pg", "default")),
    ("/podgroups/validate", podgroup("pg", "team")),
    ("/pods/mutate", JOB_POD),
    ("/pods/validate", pod()),
    ("/hypernodes/validate", hypernode("leaf-0", 1, ("Node", "node-0"))),
]


@pytest.mark.parametrize(("path", "obj"), ALLOWED)
async def test_every_path_answers_an_admission_review(client, path, obj):
    sent = review(obj, uid=f"uid-{path}")
    status, body = await post(client, path, sent)
    assert status == 200
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = body["response"]
    assert response["uid"] == f"uid-{path}"
    assert response["allowed"] is True, response
    if path.endswith("/validate"):
        assert "patch" not in response and "patchType" not in response
    elif path != "/podgroups/mutate":  # the namespace names no queue here: nothing to change
        assert response["patchType"] == "JSONPatch"
        patched = jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(response["patch"])))
        assert patched != obj


async def test_denial_reads_as_volcano_wrote_it(client, registry):
    obj = job("job1", task("worker", 2, minAvailable=3), queue="closed", minAvailable=2)
    status, body = await post(client, "/jobs/validate", review(obj, uid="u-deny"))
    assert status == 200
    assert body["response"] == {
        "uid": "u-deny",
        "allowed": False,
        "status": {
            "status": "Failure",
            "code": 400,
            "reason": "BadRequest",
            "message": "'minAvailable' is greater than 'replicas' in task: worker, job: job1; can only submit job "
            "to queue with state `Open`, queue `closed` status is `Closed`;",
        },
    }
    labels = {"webhook": "validatejob.volcano.sh", "operation": "CREATE", "allowed": "false"}
    assert registry.get_sample_value("lapilli_webhook_admission_total", labels) == 1


async def test_queue_denial_on_delete(client):
    status, body = await post(client, "/queues/validate", review(None, "DELETE", old=queue("default")))
    assert status == 200
    assert body["response"]["status"]["message"] == "`default` queue can not be deleted"
    assert body["response"]["status"]["code"] == 403


async def test_warnings_are_returned(client):
    _, body = await post(client, "/jobs/mutate", review(job("j", plugins={"mpi": ["--master=worker"]})))
    assert body["response"]["warnings"] == [
        "plugin svc added: the mpi plugin needs it",
        "plugin ssh added: the mpi plugin needs it",
    ]


async def test_object_of_the_wrong_kind_is_denied(client):
    status, body = await post(client, "/jobs/validate", review(queue("q"), uid="u-kind"))
    assert status == 200
    assert body["response"]["uid"] == "u-kind"
    assert body["response"]["allowed"] is False
    assert (
        body["response"]["status"]["message"]
        == "/jobs/validate reviews Job objects, got scheduling.volcano.sh/v1beta1 Queue"
    )


async def test_unhandled_operation_is_admitted_unchanged(client):
    _, body = await post(client, "/jobs/mutate", review(job(), "UPDATE", old=job()))
    assert body["response"] == {"uid": body["response"]["uid"], "allowed": True}


async def test_query_string_timeout_is_ignored(client):
    status, _ = await post(client, "/pods/validate?timeout=10s", review(pod()))
    assert status == 200


@pytest.mark.parametrize(
    ("body", "content_type", "status", "reason"),
    [
        (
            b"{not json",
            "application/json",
            400,
            "body is not JSON: unexpected character, expected a string key: line 1 column 2 (char 1)",
        ),
        (b'"a string"', "application/json", 400, "body must be a JSON object (an AdmissionReview)"),
        (
            orjson.dumps(review(pod()) | {"apiVersion": "admission.k8s.io/v1beta1"}),
            "application/json",
            400,
            "apiVersion must be admission.k8s.io/v1, got 'admission.k8s.io/v1beta1'",
        ),
        (
            orjson.dumps(review(pod()) | {"kind": "Pod"}),
            "application/json",
            400,
            "kind must be AdmissionReview, got 'Pod'",
        ),
        (
            orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
            "application/json",
            400,
            "request is missing (an AdmissionReview v1 carries request.uid, kind and object)",
        ),
        (
            orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"kind": {}}}),
            "application/json",
            400,
            "request.uid is missing or empty",
        ),
        (orjson.dumps(review(pod())), "text/plain", 415, "content type must be application/json, got 'text/plain'"),
        (
            orjson.dumps(review(pod())),
            "application/x-www-form-urlencoded",
            415,
            "content type must be application/json, got 'application/x-www-form-urlencoded'",
        ),
    ],
)
async def test_bad_input_gets_a_one_line_4xx(client, registry, body, content_type, status, reason):
    got_status, got = await post(client, "/pods/validate", body, content_type)
    assert got_status == status
    assert got["error"] == reason
    assert (
        registry.get_sample_value(
            "lapilli_webhook_bad_requests_total", {"path": "/pods/validate", "status": str(status)}
        )
        == 1
    )


async def test_wrong_api_version_keeps_the_uid(client):
    sent = review(pod(), uid="u-v1beta1") | {"apiVersion": "admission.k8s.io/v1beta1"}
    _, got = await post(client, "/pods/validate", sent)
    assert got["uid"] == "u-v1beta1"


async def test_body_over_3_mib(client):
    big = review(pod()) | {"padding": "x" * MAX_BODY}
    status, got = await post(client, "/jobs/validate", big)
    assert status == 413
    assert got["error"].startswith("body of ") and got["error"].endswith(f"exceeds the {MAX_BODY}-byte limit")


async def test_chunked_body_over_3_mib_without_length(client):
    async def chunks():
        yield b'{"apiVersion": "admission.k8s.io/v1", "padding": "'
        for _ in range(4):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    resp = await client.post("/jobs/validate", data=chunks(), headers={"Content-Type": "application/json"})
    assert resp.status == 413
    assert orjson.loads(await resp.read()) == {"error": f"body exceeds the {MAX_BODY}-byte limit"}


@pytest.mark.parametrize(("method", "path", "status"), [("GET", "/jobs/mutate", 405), ("POST", "/nope", 404)])
async def test_routing_errors_are_json_too(client, method, path, status):
    resp = await client.request(method, path)
    assert resp.status == status
    assert "error" in orjson.loads(await resp.read())


async def test_a_rule_that_raises_is_a_denial_not_a_500(aiohttp_client, registry):
    class Broken:
        def get(self, name):
            raise RuntimeError("lister exploded")

        def list(self):
            raise RuntimeError("lister exploded")

    app = make_app(AdmissionContext(queues=Broken()), WebhookMetrics(registry))
    client = await aiohttp_client(app)
    status, body = await post(client, "/podgroups/validate", review(podgroup("pg", "team"), uid="u-boom"))
    assert status == 200
    assert body["response"]["uid"] == "u-boom"
    assert body["response"]["status"]["message"] == (
        "lapilli could not evaluate this object (RuntimeError); see the lapilli logs"
    )
    assert (
        registry.get_sample_value("lapilli_webhook_rule_failures_total", {"webhook": "validatepodgroup.volcano.sh"})
        == 1
    )
