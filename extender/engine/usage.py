"""Usage-decayed fair share in the engine: the `fairshare` plugin's arguments and each queue's decayed usage at the
session's `now` (in the spirit of Kueue's admission fair sharing; no Volcano counterpart).

The usage enters as data: each Queue's record (`lapilli.usage`, persisted by the scheduler's leader) is decayed from
its sample time to `now`, plus what the queue holds now counted since that sample, at most two sampling intervals
back (the same step the leader takes at its next sample, so the session sees the value the leader is about to
write). Every level of a queue tree has its own record and its own allocation (its descendants' pods). Without a
`fairshare` entry in the conf nothing here runs and a session decides exactly what it decided before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from extender.engine.arguments import Arguments, ConfError, boolean, number, shown
from extender.engine.snapshot import Snapshot
from lapilli.resources.units import PODS, Units
from lapilli.times import parse_seconds

PLUGIN: Final = "fairshare"
DEFAULT_HALF_LIFE: Final = 7 * 86400.0
DEFAULT_SAMPLING: Final = 300.0
MIN_SAMPLING: Final = 1.0
# Pods whose resources a queue consumes: bound to a node and not finished.
CONSUMING_PHASES: Final = ("Pending", "Running")


@dataclass(frozen=True, slots=True)
class FairShareArgs:
    """The `fairshare` plugin's arguments, validated when the conf loads."""

    half_life: float = DEFAULT_HALF_LIFE  # halfLife
    sampling_interval: float = DEFAULT_SAMPLING  # samplingInterval: how often the leader persists the usage
    weights: tuple[tuple[str, float], ...] | None = None  # resourceWeights; None: every resource but pods weighs 1
    queue_order: bool = True  # queueOrder: order queues by decayed usage
    share_weight: float = 0.0  # shareWeight: proportion/capacity/drf count this × the average usage into shares

    def weight(self, name: str) -> float:
        if name == PODS:
            return 0.0
        if self.weights is None:
            return 1.0
        return dict(self.weights).get(name, 0.0)


def _duration(arguments: Arguments, key: str, default: float) -> float:
    value = arguments.get(key)
    if value is None:
        return default
    try:
        return parse_seconds(value)
    except ValueError:
        raise ConfError(f"argument {key}: {shown(value)} is not a duration (e.g. 168h, 5m)") from None


def _weights(arguments: Arguments) -> tuple[tuple[str, float], ...] | None:
    raw = arguments.get("resourceWeights")
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        raise ConfError("argument resourceWeights: expected a mapping of resource names to weights "
                        "(e.g. {nvidia.com/gpu: 1})")
    weights = []
    for name, value in raw.items():
        try:
            weight = -1.0 if isinstance(value, bool) else float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            weight = -1.0
        if not weight >= 0 or weight == float("inf"):
            raise ConfError(f"argument resourceWeights.{name}: {shown(value)} is not a weight (a number ≥ 0)")
        weights.append((str(name), weight))
    if not any(w > 0 for _, w in weights):
        raise ConfError("argument resourceWeights: every weight is 0, so no usage would count")
    return tuple(sorted(weights))


def parse_arguments(arguments: Arguments) -> FairShareArgs:
    """Refuses (ConfError) what cannot work: a half-life that is not positive, a sampling interval under a second
    or longer than the half-life, negative weights, a negative share weight."""
    half_life = _duration(arguments, "halfLife", DEFAULT_HALF_LIFE)
    if half_life <= 0:
        raise ConfError("argument halfLife: must be longer than 0s")
    sampling = _duration(arguments, "samplingInterval", DEFAULT_SAMPLING)
    if not MIN_SAMPLING <= sampling <= half_life:
        raise ConfError(f"argument samplingInterval: {shown(arguments.get('samplingInterval'))} must lie between "
                        f"1s and the half-life")
    try:
        share_weight = number(arguments, "shareWeight", 0.0)
    except ConfError:
        raise ConfError(f"argument shareWeight: {shown(arguments.get('shareWeight'))} is not a number") from None
    if share_weight < 0:
        raise ConfError(f"argument shareWeight: {shown(arguments.get('shareWeight'))} must be ≥ 0")
    return FairShareArgs(half_life, sampling, _weights(arguments), boolean(arguments, "queueOrder", True),
                         share_weight)


def conf_args(plugins: Iterable[tuple[str, Arguments]]) -> FairShareArgs | None:
    """The first `fairshare` entry's arguments among a conf's (name, arguments), None when there is none."""
    for name, arguments in plugins:
        if name == PLUGIN:
            return parse_arguments(arguments)
    return None


def ancestry(snap: Snapshot) -> dict[str, list[str]]:
    """Each queue's ancestors that are Queues, top-down (a `parent` that names no queue, or a cycle, ends it)."""
    return ancestors_of({name: q.parent for name, q in snap.queues.items()})


def ancestors_of(parents: Mapping[str, str]) -> dict[str, list[str]]:
    """queue -> its ancestors among `parents`' keys, top-down, from each queue's parent ("" for none)."""
    out: dict[str, list[str]] = {}
    for name in parents:
        chain: list[str] = []
        parent = parents[name]
        while parent and parent in parents and parent not in chain and parent != name:
            chain.append(parent)
            parent = parents[parent]
        out[name] = chain[::-1]
    return out


def held_by_queue(requests: Iterable[tuple[str, Mapping[str, float]]], ancestors: Mapping[str, list[str]],
                  ) -> dict[str, Units]:
    """(queue, request) of every consuming pod, summed per queue and counted again for each of its ancestors."""
    out: dict[str, Units] = {}
    for queue, request in requests:
        for name in (queue, *ancestors.get(queue, ())):
            held = out.setdefault(name, {})
            for resource, value in request.items():
                if resource != PODS:
                    held[resource] = held.get(resource, 0.0) + value
    return out


def allocations(snap: Snapshot) -> dict[str, Units]:
    """What each queue consumes now (Volcano units): its PodGroups' pods bound to a node and not finished, counted
    for the queue and for every ancestor."""
    pairs = []
    for pod in snap.pods.values():
        if not pod.group or not pod.node_name or pod.phase not in CONSUMING_PHASES:
            continue
        pg = snap.podgroups.get(f"{pod.namespace}/{pod.group}")
        if pg is not None and pg.queue in snap.queues:
            pairs.append((pg.queue, pod.request))
    return held_by_queue(pairs, ancestry(snap))


def decayed(snap: Snapshot, args: FairShareArgs, now: float) -> dict[str, Units]:
    """Each queue's decayed usage at `now` (Volcano units × seconds), as the leader's next sample will write it; a
    queue without a record has used nothing."""
    held = allocations(snap)
    out: dict[str, Units] = {}
    for name, queue in snap.queues.items():
        record = queue.usage
        out[name] = {} if record is None else record.next_sample(now, args.half_life, held.get(name, {}),
                                                                  args.sampling_interval)
    return out


__all__ = ["PLUGIN", "FairShareArgs", "allocations", "ancestors_of", "ancestry", "conf_args", "decayed",
           "held_by_queue", "parse_arguments"]
