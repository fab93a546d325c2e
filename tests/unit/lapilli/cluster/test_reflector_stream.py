"""Splitting and decoding a watch stream (the input of every reflector)."""

from __future__ import annotations

import orjson
import pytest

from lapilli.kube import ApiError, Gone
from lapilli.kube.watch import LineSplitter, decode_event


def test_lines_split_across_chunks_and_blank_lines_skipped():
    big = b"x" * 300_000  # far beyond aiohttp's 128 KiB readline limit
    stream = b'{"a":1}\n\n{"b":"' + big + b'"}\n{"c":'
    splitter = LineSplitter()
    lines = []
    for i in range(0, len(stream), 4096):
        lines.extend(splitter.feed(stream[i : i + 4096]))
    assert [len(line) for line in lines] == [7, len(big) + 8]
    assert list(splitter.feed(b"3}\n")) == [b'{"c":3}']


def test_decode_event_and_bookmark():
    event = decode_event(orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "9"}}}))
    assert event.type == "ADDED" and event.resource_version == "9"
    bookmark = decode_event(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}')
    assert bookmark.type == "BOOKMARK" and bookmark.resource_version == "12"


def test_error_events_raise_gone_or_api_error():
    expired = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}}
    with pytest.raises(Gone) as gone:
        decode_event(orjson.dumps(expired))
    assert gone.value.status == 410 and gone.value.reason == "Expired"
    with pytest.raises(ApiError) as other:
        decode_event(b'{"type":"ERROR","object":{"code":500,"message":"boom"}}')
    assert not isinstance(other.value, Gone) and other.value.status == 500


def test_unknown_event_type_is_an_error():
    with pytest.raises(ValueError):
        decode_event(b'{"type":"SURPRISE","object":{}}')
