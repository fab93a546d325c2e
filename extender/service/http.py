"""The extender's HTTP face on aiohttp: decode, call one `Extender` method, encode — errors mapped in one place.

Bodies that are not JSON or not the extender types get a 400 with an `Error` a person can act on; a verb asked of
a replica that does not hold the Lease gets a 503, so kube-scheduler retries against the leader; a verb that fails
any other way answers 200 with a one-line `Error` (its traceback is logged), never a 500.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from extender.service.core import Extender
from extender.service.wire import ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs

# The largest real request: 65,536 node names (wire.MAX_NODES) of typical length with a pod of etcd's 1.5 MiB
# object limit fits in 8 MiB, with room. (Full NodeLists, without nodeCacheCapable, fit only for small clusters:
# Lapilli ships nodeCacheCapable: true.) Anything bigger is refused before it is read.
MAX_BODY = 8 * 1024 * 1024
# How long a filter call waits for a plan on its way, under the filter entry's 5 s httpTimeout (manifests/scheduler).
HOLD_S: Final = 3.0
HOLD_POLL_S: Final = 0.05
M = TypeVar("M", bound=BaseModel)
log = logging.getLogger("lapilli.extender")
EXTENDER: web.AppKey[Extender] = web.AppKey("extender", Extender)
IS_LEADER: web.AppKey[Callable[[], bool]] = web.AppKey("is_leader")


class BadRequest(Exception):
    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.status = status


# What a malformed object raises where a verb reads it (a field of the wrong type, a quantity that is not one):
# the request is bad, the service is not. Pods are kept raw on the verbs' path (a PodSpec model per call would
# cost more than the verb), so this is where their shape is found wrong.
_MALFORMED = (TypeError, AttributeError, ValueError, KeyError, IndexError)


def _one_line(text: str, limit: int = 400) -> str:
    return " ".join(text.split())[:limit]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def _decode(request: web.Request, model: type[M]) -> M:
    if request.content_type not in ("application/json", ""):
        raise BadRequest(f"content type must be application/json, got {request.content_type}", 415)
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise BadRequest(f"body of {request.content_length} bytes exceeds the {MAX_BODY}-byte limit", 413)
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadRequest(f"body exceeds the {MAX_BODY}-byte limit", 413) from None
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not JSON: {_one_line(str(exc))}") from exc
    if not isinstance(raw, dict):
        raise BadRequest(f"expected a JSON object ({model.__name__}), got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or model.__name__
        raise BadRequest(_one_line(f"not a valid {model.__name__}: {where}: {first['msg']}")) from exc


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _hold(extender: Extender) -> None:
    """Wait (up to HOLD_S) while a plan is on its way (`SessionLoop.planning`): after a start or a takeover,
    kube-scheduler's sequential cycle waits on one pod instead of turning every pod it meets away into back-off."""
    deadline = time.monotonic() + HOLD_S
    while extender.loop.planning() and time.monotonic() < deadline:
        await asyncio.sleep(HOLD_POLL_S)


def _verb(name: str, call: Callable[[Extender, web.Request], Awaitable[Any]], hold: bool = False) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        extender = request.app[EXTENDER]
        started = time.perf_counter()
        try:
            if hold:
                await _hold(extender)
            if not request.app[IS_LEADER]():
                return _json({"Error": "lapilli: this replica does not hold the extender lease"}, 503)
            result = await call(extender, request)
            payload = result.model_dump(by_alias=True) if isinstance(result, BaseModel) else result
            return _json(payload)
        except BadRequest as exc:
            return _json({"Error": f"lapilli: {exc}"}, exc.status)
        except _MALFORMED as exc:
            log.info("%s: bad request: %s: %s", name, type(exc).__name__, _one_line(str(exc)))
            reason = f"lapilli: cannot read the {name} request: {type(exc).__name__}: {_one_line(str(exc))}"
            return _json({"Error": reason}, 400)
        except Exception as exc:  # last resort: a bug, or a failure no layer below answered
            # 200 with `Error`, not aiohttp's 500 page: kube-scheduler fails the verb either way (a bind is undone
            # and the pod requeued, a prioritize ignored), but only `Error` reaches its log and the pod's events.
            log.exception("%s: failed", name)
            extender.metrics.verb_failures.labels(name).inc()
            return _json({"Error": f"lapilli: {name} failed: {type(exc).__name__}: {_one_line(str(exc))}"})
        finally:
            extender.metrics.verb_seconds.labels(name).observe(time.perf_counter() - started)

    return handle


async def _filter(ext: Extender, request: web.Request) -> Any:
    return ext.filter(await _decode(request, ExtenderArgs))


async def _prioritize(ext: Extender, request: web.Request) -> Any:
    return ext.prioritize(await _decode(request, ExtenderArgs))


async def _bind(ext: Extender, request: web.Request) -> Any:
    return await ext.bind(await _decode(request, ExtenderBindingArgs))


async def _preempt(ext: Extender, request: web.Request) -> Any:
    return ext.preempt(await _decode(request, ExtenderPreemptionArgs))


def make_app(extender: Extender, is_leader: Callable[[], bool], ready: Callable[[], bool]) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[EXTENDER] = extender
    app[IS_LEADER] = is_leader

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok") if ready() else web.Response(text="not ready", status=503)

    app.router.add_post("/extender/filter", _verb("filter", _filter, hold=True))
    app.router.add_post("/extender/prioritize", _verb("prioritize", _prioritize))
    app.router.add_post("/extender/preempt", _verb("preempt", _preempt))
    app.router.add_post("/extender/gang/bind", _verb("bind", _bind))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
