"""GPU utilisation of simulated pods, exported as the DCGM exporter does, so idle-GPU reclaim runs its whole path in
`lapilli dev` with a real Prometheus scraping the simulated kubelet's `/metrics`.

Each Running pod that asks for `nvidia.com/gpu` gets one `DCGM_FI_DEV_GPU_UTIL` series per GPU, labelled like the
exporter's (`gpu`, `UUID`, `device`, `modelName`, `Hostname`, and the pod it is assigned to: `container`,
`namespace`, `pod`). Its value comes from the pod's annotation `sim.lapilli.io/gpu-util`: a percentage (`0`, `85`),
or a schedule of them from the pod's start, `PERCENT[@OFFSET],…` with offsets in seconds or Go durations
(`90,0@10m`: 90 % for ten minutes, then idle). A pod without the annotation is busy (100 %); a malformed one
exports nothing for that pod (a missing reading: never idle), with the reason logged by the kubelet.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from lapilli.meta import Obj, annotations_of, name_of, namespace_of
from lapilli.resources.quantity import parse_quantity
from lapilli.times import parse_seconds

UTIL_ANNOTATION: Final = "sim.lapilli.io/gpu-util"
GPU_RESOURCE: Final = "nvidia.com/gpu"
BUSY: Final = 100.0
METRIC: Final = "DCGM_FI_DEV_GPU_UTIL"
MODEL: Final = "Lapilli Simulated GPU"


def parse_schedule(text: str) -> tuple[tuple[float, float], ...]:
    """`PERCENT[@OFFSET],…` as (offset seconds, percent) in offset order; ValueError when malformed."""
    steps: list[tuple[float, float]] = []
    for part in text.split(","):
        value, _, offset = part.strip().partition("@")
        try:
            percent = float(value)
        except ValueError:
            raise ValueError(f"{UTIL_ANNOTATION}: {value!r} is not a percentage") from None
        if not math.isfinite(percent) or not 0 <= percent <= 100:
            raise ValueError(f"{UTIL_ANNOTATION}: {value!r} is not between 0 and 100")
        steps.append((parse_seconds(offset) if offset else 0.0, percent))
    return tuple(sorted(steps))


def utilisation(pod: Obj, running_for: float) -> float:
    """The pod's GPU utilisation `running_for` seconds after it started; ValueError on a malformed annotation."""
    raw = annotations_of(pod).get(UTIL_ANNOTATION)
    if raw is None or not str(raw).strip():
        return BUSY
    current = BUSY
    for offset, percent in parse_schedule(str(raw)):
        if offset > running_for:
            break
        current = percent
    return current


def gpus_of(pod: Obj) -> list[tuple[str, int]]:
    """(container, GPUs) for each container of the pod that asks for GPUs (limits, else requests)."""
    out = []
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        raw = (resources.get("limits") or {}).get(GPU_RESOURCE) or (resources.get("requests") or {}).get(GPU_RESOURCE)
        count = int(parse_quantity(str(raw))) if raw is not None else 0
        if count > 0:
            out.append((str(container.get("name") or ""), count))
    return out


@dataclass(frozen=True, slots=True)
class GpuSeries:
    node: str
    gpu: int
    container: str
    namespace: str
    pod: str
    value: float

    def line(self) -> str:
        labels = {"gpu": str(self.gpu), "UUID": f"GPU-sim-{self.node}-{self.gpu}", "device": f"nvidia{self.gpu}",
                  "modelName": MODEL, "Hostname": self.node, "container": self.container,
                  "namespace": self.namespace, "pod": self.pod}
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        return f"{METRIC}{{{text}}} {self.value:g}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def node_series(node: str, pods: Iterable[tuple[Obj, float]]) -> tuple[list[GpuSeries], dict[str, str]]:
    """The series of one node's Running pods, given with how long each has run, GPUs numbered on the node in pod
    name order as a device plugin hands them out; and the pods left out for a malformed annotation, with why."""
    out: list[GpuSeries] = []
    problems: dict[str, str] = {}
    index = 0
    for pod, running_for in sorted(pods, key=lambda p: (namespace_of(p[0]), name_of(p[0]))):
        try:
            asks = gpus_of(pod)
            value = utilisation(pod, running_for)
        except ValueError as exc:
            problems[f"{namespace_of(pod)}/{name_of(pod)}"] = str(exc)
            continue
        for container, count in asks:
            for _ in range(count):
                out.append(GpuSeries(node, index, container, namespace_of(pod), name_of(pod), value))
                index += 1
    return out, problems


def exposition(series: Iterable[GpuSeries]) -> str:
    """The Prometheus text format of `series`, with the exporter's HELP and TYPE lines."""
    lines = [f"# HELP {METRIC} GPU utilization (in %).", f"# TYPE {METRIC} gauge"]
    lines += [s.line() for s in series]
    return "\n".join(lines) + "\n"


__all__ = ["UTIL_ANNOTATION", "GpuSeries", "exposition", "gpus_of", "node_series", "parse_schedule",
           "utilisation"]
