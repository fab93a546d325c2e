"""Reading a Prometheus server: the two calls of its HTTP API that Lapilli needs, instant and range queries
(`/api/v1/query`, `/api/v1/query_range`), answered as plain samples and series.

A Prometheus answer is an envelope `{"status": "success"|"error", "data": {"resultType": ..., "result": [...]},
"errorType": ..., "error": ...}`; a vector's samples are `{"metric": {labels}, "value": [t, "v"]}` and a matrix's
series `{"metric": {labels}, "values": [[t, "v"], ...]}`. Anything else (the server down, an error answer, a body
that is not that shape, a value that is not a number) raises `PrometheusError` with one readable line: the callers
(the idle-GPU monitor, the dashboard) report it and go on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import aiohttp
import orjson

DEFAULT_TIMEOUT_S: Final = 10.0


class PrometheusError(Exception):
    """The server could not be asked, refused the query, or answered something else than a result."""


@dataclass(frozen=True, slots=True)
class Sample:
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class Series:
    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]  # (unix seconds, value), in time order


def _number(raw: object) -> float:
    try:
        value = float(str(raw))
    except ValueError as exc:
        raise PrometheusError(f"not a sample value: {raw!r}") from exc
    return value


def _labels(item: Mapping[str, Any]) -> dict[str, str]:
    metric = item.get("metric")
    if not isinstance(metric, dict):
        raise PrometheusError("a result without its labels")
    return {str(k): str(v) for k, v in metric.items()}


def _point(raw: object) -> tuple[float, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise PrometheusError(f"not a [time, value] pair: {raw!r}")
    return _number(raw[0]), _number(raw[1])


def decode(body: bytes, expect: str) -> list[dict[str, Any]]:
    """The `result` list of a Prometheus answer whose resultType is `expect` (vector or matrix)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise PrometheusError(f"answer is not JSON: {body[:80]!r}") from exc
    if not isinstance(doc, dict):
        raise PrometheusError("answer is not a Prometheus API envelope")
    if doc.get("status") != "success":
        raise PrometheusError(f"{doc.get('errorType') or 'error'}: {doc.get('error') or 'no reason given'}")
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != expect or not isinstance(data.get("result"), list):
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise PrometheusError(f"expected a {expect} result, got {kind or 'something else'}")
    return [item for item in data["result"] if isinstance(item, dict)]


class Prometheus:
    """One Prometheus server at `url` (`http://prometheus:9090`, or with a path prefix)."""

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Prometheus:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _get(self, path: str, params: dict[str, str]) -> bytes:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(f"{self.url}{path}", params=params) as resp:
                body = await resp.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise PrometheusError(f"{self.url}: {' '.join(str(exc).split()) or type(exc).__name__}") from exc
        if resp.status >= 400 and not body.startswith(b"{"):
            raise PrometheusError(f"{self.url}: HTTP {resp.status}")
        return body

    async def query(self, promql: str, at: float | None = None) -> list[Sample]:
        """An instant query: one sample per series (NaN and infinite values left out)."""
        params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
        out = []
        for item in decode(await self._get("/api/v1/query", params), "vector"):
            _, value = _point(item.get("value"))
            if math.isfinite(value):
                out.append(Sample(_labels(item), value))
        return out

    async def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[Series]:
        """A range query from `start` to `end` (unix seconds), one point every `step_s`."""
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        out = []
        for item in decode(await self._get("/api/v1/query_range", params), "matrix"):
            values = item.get("values")
            if not isinstance(values, list):
                raise PrometheusError("a matrix series without its values")
            points = tuple(p for p in (_point(v) for v in values) if math.isfinite(p[1]))
            out.append(Series(_labels(item), points))
        return out


__all__ = ["Prometheus", "PrometheusError", "Sample", "Series", "decode"]
