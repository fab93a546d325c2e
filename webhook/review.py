"""AdmissionReview v1 on the wire (`k8s.io/api/admission/v1`): the request model and the response builder.

Requests are parsed with pydantic (lowerCamel aliases, unknown keys ignored); the reviewed object stays a plain
dict for the rules to decode. Responses are built as dicts and serialised with orjson: `response.uid` echoes the
request, a patch is base64 of the JSON op array with `patchType: JSONPatch` (mutating webhooks only), a denial
carries a `metav1.Status` whose message kubectl prints after `admission webhook "<name>" denied the request: `.
"""

from __future__ import annotations

import base64
from typing import Any, Final, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from webhook.outcome import Outcome

API_VERSION: Final = "admission.k8s.io/v1"
KIND: Final = "AdmissionReview"
MAX_WARNING: Final = 120  # the apiserver may truncate longer warnings; kubectl prints each on one line

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)


class GroupVersionKind(_Model):
    group: str = ""
    version: str = ""
    kind: str = ""


class GroupVersionResource(_Model):
    group: str = ""
    version: str = ""
    resource: str = ""


class UserInfo(_Model):
    username: str = ""
    uid: str = ""
    groups: list[str] = Field(default_factory=list)
    extra: dict[str, list[str]] = Field(default_factory=dict)


class AdmissionRequest(_Model):
    """`AdmissionRequest`: what is being admitted. `object` is null on DELETE, `old_object` set on UPDATE/DELETE."""

    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource = GroupVersionResource()
    sub_resource: str = ""
    request_kind: GroupVersionKind | None = None
    request_resource: GroupVersionResource | None = None
    request_sub_resource: str = ""
    name: str = ""
    namespace: str = ""
    operation: Operation
    user_info: UserInfo = UserInfo()
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    dry_run: bool = False
    options: dict[str, Any] | None = None


class AdmissionReview(_Model):
    api_version: Literal["admission.k8s.io/v1"]
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


def _warning(text: str) -> str:
    return text if len(text) <= MAX_WARNING else text[: MAX_WARNING - 1] + "…"


def response_body(uid: str, outcome: Outcome, *, mutating: bool) -> dict[str, Any]:
    """The AdmissionReview answered for `uid`. Validating webhooks never carry a patch (the apiserver refuses it)."""
    response: dict[str, Any] = {"uid": uid, "allowed": outcome.allowed}
    if not outcome.allowed:
        response["status"] = {
            "status": "Failure",
            "code": outcome.code,
            "reason": outcome.reason,
            "message": outcome.message,
        }
    elif mutating and outcome.patch:
        response["patch"] = base64.b64encode(orjson.dumps(list(outcome.patch))).decode("ascii")
        response["patchType"] = "JSONPatch"
    if outcome.warnings:
        response["warnings"] = [_warning(w) for w in outcome.warnings]
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}
