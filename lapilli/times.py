"""Times and durations as Kubernetes and Volcano write them. Pure: the engine may use it.

RFC 3339 `metav1.Time` (whole seconds, `Z`) and `metav1.MicroTime` (microseconds, `Z`, what Leases and
events.k8s.io use) and parsing either back; Go durations (`metav1.Duration`, `time.ParseDuration` and
`time.Duration.String()`); and the "seconds or a Go duration" that Lapilli's own annotations and flags take.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = [
    "go_duration",
    "parse_duration",
    "parse_rfc3339",
    "parse_rfc3339_datetime",
    "parse_seconds",
    "rfc3339",
    "rfc3339_micro",
]

_DURATION_PART_RE: Final = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNIT_SECONDS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu; Go accepts both
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


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


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration (`metav1.Duration` on the wire: "90s", "1h30m", "250ms", "-1.5h", "0").

    Mirrors `time.ParseDuration`: an optional sign, then one or more decimal numbers each with a unit of ns, us
    (µs), ms, s, m or h; a bare "0" is the only unit-less value. Raises ValueError on anything else.
    """
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return timedelta(0)
    if not body:
        raise ValueError(f"{text!r} is not a duration (expected e.g. '30s', '10m', '1h30m')")
    seconds = 0.0
    position = 0
    while position < len(body):
        match = _DURATION_PART_RE.match(body, position)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(f"{text!r} is not a duration (expected e.g. '30s', '10m', '1h30m')")
        seconds += float(match.group(1)) * _DURATION_UNIT_SECONDS[match.group(2)]
        position = match.end()
    return timedelta(seconds=-seconds if text.startswith("-") else seconds)


def go_duration(seconds: float) -> str:
    """`time.Duration.String()` for whole-millisecond precision: "0s", "1.5s", "2m3s", "1h0m0s"."""
    if seconds <= 0:
        return "0s"
    total_ms = round(seconds * 1000)
    hours, rest_ms = divmod(total_ms, 3_600_000)
    minutes, rest_ms = divmod(rest_ms, 60_000)
    secs = f"{rest_ms // 1000}" + (f".{rest_ms % 1000:03d}".rstrip("0") if rest_ms % 1000 else "")
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    if total_ms < 1000:
        return f"{total_ms}ms"
    return f"{secs}s"


def parse_seconds(value: Any) -> float:
    """Seconds from a number, a numeric string or a Go duration (`10m`, `1h30m`); never negative."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (expected seconds like 600 or a Go duration like '10m')")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            try:
                seconds = parse_duration(text).total_seconds()
            except ValueError:
                raise ValueError(
                    f"{value!r} is not a duration (expected seconds like 600 or a Go duration like '10m')"
                ) from None
    else:
        raise ValueError(f"{value!r} is not a duration (expected seconds like 600 or a Go duration like '10m')")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{value!r} is not a non-negative, finite duration")
    return seconds
