"""A queue's decayed usage: what it consumed over time, older use counting exponentially less.

The counterpart of Kueue's admission fair sharing (KEP-4136: `usageHalfLifeTime`, `usageSamplingInterval`,
`resourceWeights`, the usage kept in the LocalQueue's status). Kueue keeps an exponential moving average of the
usage *rate*; Lapilli keeps the decayed *integral*, per resource,

    U(t) = ∫ a(s) · 2^(−(t−s)/h) ds        (a: what the queue holds at s, h: the half-life)

in resource·seconds, so "lab-a used 1,900 GPU·h (decayed)" is a quantity a person can read; U/τ with τ = h/ln 2 (the
decay's mean life) is Kueue's average rate. For an allocation `a` held constant over `Δ` seconds the integral
advances exactly as

    U(t+Δ) = U(t) · 2^(−Δ/h) + a · τ · (1 − 2^(−Δ/h))

so sampling every 5 minutes or every second gives the same value while the allocation does not change, and a
leader that resumes from a persisted record continues the same curve. What a queue holds at a sample is counted back
to its previous record but never more than two sampling intervals (`UsageRecord.next_sample`): records of queues
that hold nothing are not rewritten, so an old record says nothing about what the queue held since.

The record lives on each Queue (every level of a hierarchy has its own) as annotation `lapilli.io/decayed-usage`:
`{"at": RFC 3339 time of the sample, "halfLife": "168h0m0s", "usage": {resource: resource·seconds}}`, resources in
Kubernetes units (GPUs, CPU cores, bytes). Inside, as everywhere in the engine, the numbers are Volcano units
(milli-units for cpu and devices) × seconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from lapilli.resources.units import CPU, GPU, MEMORY, PODS, Units
from lapilli.times import go_duration, parse_rfc3339, parse_seconds, rfc3339_micro

USAGE_ANNOTATION: Final = "lapilli.io/decayed-usage"
HOUR: Final = 3600.0
HELD_BACK: Final = 2  # sampling intervals what a queue holds now counts back at most (one sample may come late)


def mean_life(half_life: float) -> float:
    """τ = h / ln 2: a constant allocation `a` held forever decays to the steady usage a·τ."""
    return half_life / math.log(2.0)


def decay_factor(elapsed: float, half_life: float) -> float:
    """2^(−elapsed/h); time that runs backwards (clock skew between two machines) decays nothing."""
    return 2.0 ** (-max(elapsed, 0.0) / half_life)


def advance(usage: Mapping[str, float], allocated: Mapping[str, float], elapsed: float,
            half_life: float) -> Units:
    """U after `elapsed` seconds during which the queue held `allocated` (both in Volcano units)."""
    decay = decay_factor(elapsed, half_life)
    gained = mean_life(half_life) * (1.0 - decay)
    out: Units = {}
    for name in sorted({*usage, *allocated}):
        if name == PODS:
            continue
        value = usage.get(name, 0.0) * decay + allocated.get(name, 0.0) * gained
        if value > 0.0:
            out[name] = value
    return out


def _scale(name: str) -> float:
    """Volcano units per Kubernetes unit (millicores per core, milli-GPUs per GPU; bytes stay bytes)."""
    return 1.0 if name in (MEMORY, PODS) else 1000.0


@dataclass(frozen=True, slots=True)
class UsageRecord:
    """One queue's decayed usage as sampled at `at` (epoch seconds), with the half-life it was sampled with."""

    at: float
    half_life: float
    usage: Mapping[str, float] = field(default_factory=dict)  # Volcano units × seconds

    def at_time(self, now: float, half_life: float | None = None, allocated: Mapping[str, float] | None = None,
                held_since: float | None = None) -> Units:
        """The usage at `now`: decayed since `at` (with `half_life`, else the record's own), plus `allocated`
        held from `held_since` (never before `at`; default `at`) to `now`."""
        half_life = half_life or self.half_life
        if held_since is None or held_since <= self.at:
            return advance(self.usage, allocated or {}, now - self.at, half_life)
        before = advance(self.usage, {}, min(held_since, now) - self.at, half_life)
        return advance(before, allocated or {}, now - min(held_since, now), half_life)

    def next_sample(self, now: float, half_life: float, allocated: Mapping[str, float], sampling: float) -> Units:
        """The usage the leader writes at `now` for a queue that holds `allocated` and samples every `sampling`
        seconds: what it holds is counted back to this record, but at most `HELD_BACK` intervals. The leader
        rewrites only the records of queues that hold something, so a queue idle overnight still has last
        evening's record; counting what it holds now since then would charge it the whole night (Kueue's sampling
        adds the current usage once per interval, likewise). The cost: use during a leader gap longer than that
        (failover takes seconds) is not counted."""
        return self.at_time(now, half_life, allocated, now - HELD_BACK * sampling)

    def to_annotation(self) -> str:
        usage = {name: value / _scale(name) for name, value in sorted(self.usage.items())}
        body = {"at": rfc3339_micro(self.at), "halfLife": go_duration(self.half_life), "usage": usage}
        return json.dumps(body, separators=(",", ":"))


def parse_record(text: str) -> UsageRecord:
    """The annotation's value; ValueError (one line naming the field) when it is not a usage record."""
    try:
        body = json.loads(text)
    except ValueError:
        raise ValueError(f"{USAGE_ANNOTATION}: not JSON") from None
    if not isinstance(body, dict):
        raise ValueError(f"{USAGE_ANNOTATION}: expected an object with at, halfLife and usage")
    try:
        at = parse_rfc3339(str(body.get("at")))
    except ValueError:
        raise ValueError(f"{USAGE_ANNOTATION}: at: {body.get('at')!r} is not an RFC 3339 time") from None
    try:
        half_life = parse_seconds(body.get("halfLife"))
    except ValueError as exc:
        raise ValueError(f"{USAGE_ANNOTATION}: halfLife: {exc}") from None
    if half_life <= 0:
        raise ValueError(f"{USAGE_ANNOTATION}: halfLife: must be positive")
    raw = body.get("usage") or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{USAGE_ANNOTATION}: usage: expected resource: resource·seconds")
    usage: Units = {}
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{USAGE_ANNOTATION}: usage.{name}: {value!r} is not a non-negative number")
        if value > 0:
            usage[str(name)] = float(value) * _scale(str(name))
    return UsageRecord(at, half_life, usage)


def record_of(annotations: Mapping[str, str]) -> tuple[UsageRecord | None, str]:
    """(the Queue's record, "") or (None, why it could not be read); (None, "") when it has none."""
    text = annotations.get(USAGE_ANNOTATION)
    if text is None:
        return None, ""
    try:
        return parse_record(str(text)), ""
    except ValueError as exc:
        return None, str(exc)


_UNIT_NAMES: Final = {GPU: "GPU", CPU: "CPU", MEMORY: "GiB"}


def headline_resource(usage: Mapping[str, float]) -> str | None:
    """The resource a person counts usage in: GPUs when any were used, else CPU, else the largest other one."""
    for name in (GPU, CPU):
        if usage.get(name, 0.0) > 0:
            return name
    others = sorted((v, n) for n, v in usage.items() if n not in (MEMORY, PODS) and v > 0)
    return others[-1][1] if others else None


def hours(name: str, value: float) -> float:
    """Volcano units × seconds as Kubernetes units × hours (GPU·h, CPU·h, GiB·h)."""
    scaled = value / _scale(name) / HOUR
    return scaled / 2**30 if name == MEMORY else scaled


def usage_text(name: str, value: float) -> str:
    """`1,900 GPU·h`, `12.5 CPU·h`; under a tenth of an hour in seconds (`40 GPU·s`); `0` for nothing."""
    amount = hours(name, value)
    unit = _UNIT_NAMES.get(name, name)
    if amount <= 0:
        return "0"
    if amount < 0.1:
        return f"{amount * HOUR:,.0f} {unit}·s"
    return f"{amount:,.0f} {unit}·h" if amount >= 10 else f"{amount:.1f} {unit}·h"


def shown_usage(annotations: Mapping[str, str], now: float) -> str:
    """A Queue's decayed usage as `queue list` and the dashboard show it: the last sample decayed to `now`, in
    its headline resource (`1,900 GPU·h`); `-` without a record, `unreadable` for one that cannot be read."""
    record, error = record_of(annotations)
    if record is None:
        return "unreadable" if error else "-"
    usage = record.at_time(now)
    resource = headline_resource(usage)
    return "0" if resource is None else usage_text(resource, usage[resource])


__all__ = [
    "HELD_BACK",
    "USAGE_ANNOTATION",
    "UsageRecord",
    "advance",
    "decay_factor",
    "headline_resource",
    "hours",
    "mean_life",
    "parse_record",
    "record_of",
    "shown_usage",
    "usage_text",
]
