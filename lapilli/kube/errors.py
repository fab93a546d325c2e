"""Errors at the API-server edge: one hierarchy, built from the `Status` object the server answers with.

Callers branch on the class (`NotFound`, `Conflict`, `Gone`) rather than on numbers; everything else is an
`ApiError` that still carries the HTTP status, the Status `reason` and the server's message.
"""

from __future__ import annotations

from typing import Any

import orjson


class ApiError(Exception):
    """The API server refused a request (any non-2xx answer, or an ERROR event in a watch)."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409: a write lost a race (resourceVersion / UID precondition) or the object already exists."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists: a create found the name taken."""


class Gone(ApiError):
    """410: the requested resourceVersion is compacted away; the caller must re-list."""


class Fenced(ApiError):
    """A write refused before it was sent: the client is fenced (its replica no longer holds the Lease that
    allowed it to write). An `ApiError`, so callers treat it as any refused write."""

    def __init__(self, message: str) -> None:
        super().__init__(503, "Fenced", message)


def error_from_status(status: int, body: dict[str, Any]) -> ApiError:
    """Map an HTTP status and a decoded `Status` body to the most specific error class."""
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or body)
    if status == 404:
        return NotFound(status, reason or "NotFound", message, body)
    if status == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
        return cls(status, reason or "Conflict", message, body)
    if status == 410:
        return Gone(status, reason or "Expired", message, body)
    return ApiError(status, reason or "Unknown", message, body)


def error_from_response(status: int, raw: bytes) -> ApiError:
    """Like `error_from_status`, for a body that may not be JSON (proxies, early TLS failures)."""
    try:
        body = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        body = {"message": raw.decode("utf-8", "replace")[:500]}
    if not isinstance(body, dict):
        body = {"message": str(body)}
    return error_from_status(status, body)
