"""Engine vectors (Volcano's units) back to the numbers people read: cpu in cores, memory in bytes, devices whole."""

from __future__ import annotations

import math
from fractions import Fraction

from lapilli.resources.quantity import format_quantity
from lapilli.resources.units import CPU, MEMORY, PODS
from lapilli.resources.vector import Dims, Vec


def number(name: str, value: float) -> float:
    """Kubernetes units: cores, bytes, whole devices (rounded to milli-units)."""
    if not math.isfinite(value):
        return value
    if name in (MEMORY, PODS):
        return float(round(value))
    return round(value) / 1000


def amount(name: str, value: float) -> str:
    """A quantity as `kubectl` writes it: `4`, `500m`, `16Gi`; `∞` for no limit."""
    if not math.isfinite(value):
        return "unlimited"
    if name in (MEMORY, PODS):
        return format_quantity(Fraction(max(round(value), 0)), binary=name == MEMORY)
    return f"{max(round(value), 0) / 1000:g}"  # cores and devices as people count them: 4, 0.5, 3.6


def resource_map(dims: Dims, vec: Vec, only: Vec | None = None) -> dict[str, float]:
    """name -> number, for the dimensions `only` asks for (> 0, `pods` left out), else every non-zero one."""
    out: dict[str, float] = {}
    for i, name in enumerate(dims.names):
        if name == PODS:
            continue
        if only is not None and only[i] <= 0:
            continue
        if only is None and abs(vec[i]) < 1e-9:
            continue
        out[name] = number(name, float(vec[i]))
    return out


def resource_rank(name: str) -> tuple[int, str]:
    """Devices first (what researchers queue for), then cpu, memory, the rest."""
    if name == CPU:
        return (1, name)
    if name == MEMORY:
        return (2, name)
    if name == PODS:
        return (3, name)
    return (0, name)
