"""The HTTP layer of the admission face: decode, call one rule, encode — and map every error to a status here.

kopf-style thin handlers over `webhook.routes.ROUTES`. Bad input never reaches a rule and never yields a 5xx:
a body that is not an AdmissionReview v1 (wrong content type, over 3 MiB, not JSON, wrong apiVersion/kind,
no `request` or `uid`) gets a 4xx with a one-line JSON reason (`{"error": ..., "uid": ...}`, uid when one was
readable). A review for another kind of object than the path serves is denied; an operation the path does not
handle is admitted unchanged (the configuration never sends one). A rule that raises is a bug: it is logged
with its traceback and counted, and the request is denied with a one-line explanation rather than a 500.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import orjson
from aiohttp import web
from pydantic import ValidationError

from webhook.context import AdmissionContext
from webhook.metrics import WebhookMetrics
from webhook.outcome import ALLOWED, Outcome, deny
from webhook.review import API_VERSION, KIND, AdmissionReview, response_body
from webhook.routes import ROUTES, Route

log = logging.getLogger("lapilli.webhook")

MAX_BODY: Final = 3 * 1024 * 1024  # what Volcano's server accepts; the apiserver's own request limit is ~3 MiB
JSON: Final = "application/json"
INTERNAL_ERROR: Final = "lapilli could not evaluate this object"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BadReview(Exception):
    """A request that is not an AdmissionReview v1 we can answer."""

    def __init__(self, status: int, reason: str, uid: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.uid = uid


def json_response(body: Mapping[str, Any], status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


def error_response(status: int, reason: str, uid: str = "") -> web.Response:
    body = {"error": reason, "uid": uid} if uid else {"error": reason}
    return json_response(body, status)


def _uid_of(body: object) -> str:
    request = body.get("request") if isinstance(body, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def _one_line(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}" + (f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else "")


def parse_review(raw: bytes) -> AdmissionReview:
    """Decode and check the envelope; raises `BadReview` with a one-line reason."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadReview(400, f"body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadReview(400, "body must be a JSON object (an AdmissionReview)")
    uid = _uid_of(body)
    if body.get("apiVersion") != API_VERSION:
        raise BadReview(400, f"apiVersion must be {API_VERSION}, got {body.get('apiVersion')!r}", uid)
    if body.get("kind") != KIND:
        raise BadReview(400, f"kind must be {KIND}, got {body.get('kind')!r}", uid)
    if not isinstance(body.get("request"), dict):
        raise BadReview(400, "request is missing (an AdmissionReview v1 carries request.uid, kind and object)")
    if not uid:
        raise BadReview(400, "request.uid is missing or empty")
    try:
        return AdmissionReview.model_validate(body)
    except ValidationError as exc:
        raise BadReview(400, _one_line(exc), uid) from None


async def read_review(request: web.Request) -> AdmissionReview:
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise BadReview(413, f"body of {request.content_length} bytes exceeds the {MAX_BODY}-byte limit")
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadReview(413, f"body exceeds the {MAX_BODY}-byte limit") from None
    if request.content_type != JSON:
        reason = f"content type must be {JSON}, got {request.content_type or 'none'!r}"
        raise BadReview(415, reason, _uid_of(_loads_or_none(raw)))
    return parse_review(raw)


def _loads_or_none(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def judge(route: Route, review: AdmissionReview, ctx: AdmissionContext, metrics: WebhookMetrics) -> Outcome:
    request = review.request
    target = route.target
    if (request.kind.group, request.kind.kind) != (target.group, target.kind):
        got = f"{request.kind.group}/{request.kind.version} {request.kind.kind}".lstrip("/")
        return deny(f"{route.path} reviews {target.kind} objects, got {got}")
    if request.operation not in route.operations:
        return ALLOWED
    try:
        return route.rule(request, ctx)
    except Exception as exc:
        metrics.rule_failures.labels(route.name).inc()
        log.exception("%s failed on %s %s/%s", route.name, request.operation, request.namespace, request.name)
        return deny(f"{INTERNAL_ERROR} ({type(exc).__name__}); see the lapilli logs")


def make_handler(route: Route, ctx: AdmissionContext, metrics: WebhookMetrics) -> Handler:
    latency = metrics.latency.labels(route.name)

    async def handle(request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        try:
            review = await read_review(request)
        except BadReview as exc:
            metrics.bad_requests.labels(route.path, str(exc.status)).inc()
            return error_response(exc.status, exc.reason, exc.uid)
        outcome = judge(route, review, ctx, metrics)
        if not outcome.allowed:
            req = review.request
            log.info("%s denied %s %s/%s: %s", route.name, req.operation, req.namespace, req.name, outcome.message)
        body = response_body(review.request.uid, outcome, mutating=route.mutating)
        metrics.reviews.labels(route.name, review.request.operation, str(outcome.allowed).lower()).inc()
        response = json_response(body)
        latency.observe(time.perf_counter() - started)
        return response

    return handle


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own refusals (404, 405, 413 ...) as one-line JSON, like ours."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason)


def add_admission_routes(app: web.Application, ctx: AdmissionContext, metrics: WebhookMetrics) -> None:
    """Register POST handlers for every path in `ROUTES` on `app`."""
    for route in ROUTES:
        app.router.add_post(route.path, make_handler(route, ctx, metrics))


def make_app(ctx: AdmissionContext, metrics: WebhookMetrics) -> web.Application:
    """An aiohttp application answering the admission paths (the assembly adds health and metrics routes)."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[json_errors])
    add_admission_routes(app, ctx, metrics)
    return app
