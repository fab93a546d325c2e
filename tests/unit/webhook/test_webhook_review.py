"""AdmissionReview v1 wire format: request parsing, response building, names and the HTTP-free envelope checks."""

import base64

import orjson
import pytest

from tests.service.reviews import job, review
from webhook.names import dns1123_label, qualified_name
from webhook.outcome import allow, deny, escape
from webhook.review import AdmissionReview, response_body
from webhook.server import BadReview, parse_review


def test_request_uses_lower_camel_aliases():
    request = AdmissionReview.model_validate(review(job(), "UPDATE", old=job(), uid="abc")).request
    assert request.uid == "abc"
    assert request.request_kind is not None and request.request_kind.kind == "Job"
    assert request.old_object is not None and request.user_info.username == "alice"
    assert request.dry_run is False


def test_allowed_mutation_carries_base64_json_patch():
    ops = [{"op": "add", "path": "/spec/queue", "value": "default"}]
    body = response_body("u1", allow(ops, ["w" * 200]), mutating=True)
    response = body["response"]
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert response["uid"] == "u1" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(response["patch"])) == ops
    assert len(response["warnings"][0]) == 120
    assert "status" not in response


def test_validating_response_never_carries_a_patch_and_empty_patch_is_omitted():
    ops = [{"op": "add", "path": "/x", "value": 1}]
    assert "patch" not in response_body("u", allow(ops), mutating=False)["response"]
    assert "patchType" not in response_body("u", allow(), mutating=True)["response"]


def test_denial_status():
    response = response_body("u", deny("queue closed", forbidden=True), mutating=False)["response"]
    assert response == {
        "uid": "u",
        "allowed": False,
        "status": {"status": "Failure", "code": 403, "reason": "Forbidden", "message": "queue closed"},
    }
    assert response_body("u", deny("bad"), mutating=True)["response"]["status"]["code"] == 400


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "body is not JSON"),
        (b"[]", "body must be a JSON object"),
        (
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}',
            "apiVersion must be admission.k8s.io/v1",
        ),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "Review"}', "kind must be AdmissionReview"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "request is missing"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}',
            "request.uid is missing",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u", "kind": {}, "operation": "PATCH"}}',
            "request.operation: Input should be",
        ),
    ],
)
def test_envelope_errors_are_one_line(body, reason):
    with pytest.raises(BadReview) as caught:
        parse_review(body)
    assert caught.value.status == 400
    assert caught.value.reason.startswith(reason)
    assert "\n" not in caught.value.reason


def test_envelope_error_keeps_the_uid():
    with pytest.raises(BadReview) as caught:
        parse_review(b'{"apiVersion": "v1", "kind": "AdmissionReview", "request": {"uid": "u-9"}}')
    assert caught.value.uid == "u-9"


def test_names():
    assert dns1123_label("ok-name") == []
    assert dns1123_label("a" * 64)[0] == "must be no more than 63 characters"
    assert qualified_name("example.com/Name") == []
    assert qualified_name("a/b/c")[0].startswith("a qualified name must consist of")
    assert qualified_name("/x") == ["prefix part must be non-empty"]
    assert qualified_name("") == [
        "name part must be non-empty",
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]
    assert escape("volcano.sh/a~b") == "volcano.sh~1a~0b"
