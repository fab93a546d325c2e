"""RFC 3339 times as Kubernetes writes them: `metav1.Time` (whole seconds, `Z`) and `metav1.MicroTime`
(microseconds, `Z`, what Leases and events.k8s.io use), and parsing either back. Pure: the engine may use it."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["parse_rfc3339", "parse_rfc3339_datetime", "rfc3339", "rfc3339_micro"]


def rfc3339(ts: float) -> str:
    """`metav1.Time` of epoch seconds `ts`: `2006-01-02T15:04:05Z` (the fraction is dropped, as Go's)."""
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(ts: float) -> str:
    """`metav1.MicroTime` of epoch seconds `ts`: `2006-01-02T15:04:05.000000Z`."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339_datetime(text: str) -> datetime:
    """An RFC 3339 time (`Z` or an offset, with or without a fraction); ValueError when it is not one."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def parse_rfc3339(text: str) -> float:
    """An RFC 3339 time as epoch seconds; ValueError when it is not one."""
    return parse_rfc3339_datetime(text).timestamp()
