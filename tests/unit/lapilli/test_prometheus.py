"""Prometheus answers decoded (lapilli/prometheus.py): results, and every other answer as one readable error."""

from __future__ import annotations

import orjson
import pytest

from lapilli.prometheus import PrometheusError, decode


def _envelope(result_type: str, result: object) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": result_type, "result": result}})


def test_results_and_refusals() -> None:
    vector = [{"metric": {"pod": "a"}, "value": [1.5, "3"]}]
    assert decode(_envelope("vector", vector), "vector") == vector
    for body, message in [
        (b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}', "bad_data: parse error"),
        (b"<html>502 Bad Gateway</html>", "answer is not JSON"),
        (b"[1, 2]", "not a Prometheus API envelope"),
        (_envelope("matrix", []), "expected a vector result, got matrix"),
        (_envelope("vector", "x"), "expected a vector result"),
    ]:
        with pytest.raises(PrometheusError, match=message):
            decode(body, "vector")
