"""The extender's HTTP face on aiohttp: decode, call one `Extender` method, encode — errors mapped in one place.

Bodies that are not JSON or not the extender types get a 400 with an `Error` a person can act on; a verb asked of
a replica that does not hold the Lease gets a 503, so kube-scheduler retries against the leader.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from extender.service.core import Extender
from extender.service.wire import ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs

MAX_BODY = 64 * 1024 * 1024  # NodeLists without nodeCacheCapable can be large
M = TypeVar("M", bound=BaseModel)
EXTENDER: web.AppKey[Extender] = web.AppKey("extender", Extender)
IS_LEADER: web.AppKey[Callable[[], bool]] = web.AppKey("is_leader")


class BadRequest(Exception):
    pass


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


async def _decode(request: web.Request, model: type[M]) -> M:
    if request.content_type not in ("application/json", ""):
        raise BadRequest(f"content type must be application/json, got {request.content_type}")
    body = await request.read()
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"request body is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise BadRequest(f"expected a JSON object ({model.__name__}), got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or model.__name__
        raise BadRequest(f"not a valid {model.__name__}: {where}: {first['msg']}") from exc


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _verb(name: str, call: Callable[[Extender, web.Request], Awaitable[Any]]) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        extender = request.app[EXTENDER]
        started = time.perf_counter()
        try:
            if not request.app[IS_LEADER]():
                return _json({"Error": "lapilli: this replica does not hold the extender lease"}, 503)
            result = await call(extender, request)
            payload = result.model_dump(by_alias=True) if isinstance(result, BaseModel) else result
            return _json(payload)
        except BadRequest as exc:
            return _json({"Error": str(exc)}, 400)
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

    app.router.add_post("/extender/filter", _verb("filter", _filter))
    app.router.add_post("/extender/prioritize", _verb("prioritize", _prioritize))
    app.router.add_post("/extender/preempt", _verb("preempt", _preempt))
    app.router.add_post("/extender/gang/bind", _verb("bind", _bind))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
