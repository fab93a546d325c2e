"""Decoding a watch stream: newline-delimited JSON events, split without aiohttp's line-length cap.

aiohttp's `readline` refuses lines over 128 KiB, and a single Pod or Job can be larger than that, so the
stream is split here from raw chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from lapilli.kube.errors import error_from_status
from lapilli.meta import resource_version

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One decoded watch event; `object` is the raw JSON object (for BOOKMARK only metadata is meaningful)."""

    type: EventType
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        return resource_version(self.object)


class LineSplitter:
    """Feed byte chunks, get complete lines back; a partial line waits for the next chunk."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if self._parts:
                self._parts.append(chunk[start:end])
                line = b"".join(self._parts)
                self._parts.clear()
            else:
                line = chunk[start:end]
            if line.strip():
                yield line
            start = end + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])


def decode_event(line: bytes) -> WatchEvent:
    """Decode one line; an ERROR event becomes the matching `ApiError` (a 410 becomes `Gone`)."""
    raw = orjson.loads(line)
    kind = raw.get("type")
    obj = raw.get("object") or {}
    if kind == "ERROR":
        raise error_from_status(int(obj.get("code") or 500), obj)
    if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
        raise ValueError(f"unknown watch event type {kind!r}")
    return WatchEvent(kind, obj)
