"""Settings of idle-GPU reclaim (a group of `lapilli serve`'s extender settings; its fields are its flags)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from lapilli.idlegpu import Policy, parse_policy
from lapilli.settings import flag

# The DCGM exporter's GPU utilisation (percent, per GPU, labelled with the pod that holds it: `namespace`, `pod`),
# the busiest of a pod's GPUs over the last five minutes: a pod is idle only if none of its GPUs did any work.
DEFAULT_QUERY: Final = "max by (namespace, pod) (max_over_time(DCGM_FI_DEV_GPU_UTIL[5m]))"


class Mode(StrEnum):
    OFF = "off"
    DRY_RUN = "dry-run"
    ON = "on"


@dataclass(frozen=True, slots=True)
class IdleGpuSettings:
    """Idle-GPU reclaim: jobs whose GPUs stay idle are warned, then given up to jobs that wait (off by default)."""

    mode: str = flag("--idle-gpu-mode", "off")
    """off (nothing is queried or written), dry-run (jobs are warned and marked in their condition and metrics, nothing
    is evicted) or on (past the grace period, and where the queue's policy is reclaim, preempt and reclaim may evict
    an idle job's pods for a job that waits for the room)."""
    prometheus_url: str = flag("--prometheus-url", "")
    """Prometheus server the GPU utilisation is read from (http://HOST:9090); needed unless --idle-gpu-mode off."""
    query: str = flag("--idle-gpu-query", DEFAULT_QUERY)
    """PromQL giving each pod's GPU utilisation in percent, one sample per pod labelled `namespace` and `pod` (or the
    DCGM exporter's old `pod_namespace` and `pod_name`)."""
    threshold_percent: float = flag("--idle-gpu-threshold", 5.0)
    """A pod is idle while its utilisation stays below this percentage; a job while all its GPU pods are."""
    window_s: float = flag("--idle-gpu-window", 3600.0)
    """Seconds a job must stay idle before it is warned (Event IdleGPU, condition lapilli.io/IdleGPU)."""
    grace_s: float = flag("--idle-gpu-grace", 1800.0)
    """Seconds from the warning until its GPUs become reclaimable (if it stays idle and its queue's policy says
    reclaim)."""
    interval_s: float = flag("--idle-gpu-interval", 60.0)
    """Seconds between utilisation readings."""
    default_policy: str = flag("--idle-gpu-default-policy", "warn")
    """Policy of a queue that names none (annotation lapilli.io/idle-gpu-policy on it or an ancestor): reclaim, warn
    or off."""

    @property
    def active(self) -> bool:
        return self.mode != Mode.OFF

    @property
    def policy(self) -> Policy:
        return parse_policy(self.default_policy) or Policy.WARN

    def problems(self) -> list[str]:
        out: list[str] = []
        if self.mode not in tuple(Mode):
            out.append(f"--idle-gpu-mode {self.mode!r} is not one of off, dry-run, on")
        if parse_policy(self.default_policy) is None:
            out.append(f"--idle-gpu-default-policy {self.default_policy!r} is not one of reclaim, warn, off")
        if not self.active or out:
            return out
        if not self.prometheus_url.startswith(("http://", "https://")):
            out.append(f"--idle-gpu-mode {self.mode} needs --prometheus-url (http:// or https://), got "
                       f"{self.prometheus_url!r}")
        if not self.query.strip():
            out.append("--idle-gpu-query is empty")
        if not 0 < self.threshold_percent <= 100:
            out.append(f"--idle-gpu-threshold {self.threshold_percent} must be a percentage above 0")
        for flag_, value in (("--idle-gpu-window", self.window_s), ("--idle-gpu-grace", self.grace_s)):
            if value < 0:
                out.append(f"{flag_} {value} must be >= 0 seconds")
        if self.interval_s <= 0:
            out.append(f"--idle-gpu-interval {self.interval_s} must be > 0 seconds")
        return out
