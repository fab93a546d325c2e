"""Settings of the scheduler extender (one frozen group of `lapilli serve`'s settings; its fields are its flags)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from extender.engine.conf import ConfError
from extender.engine.run import parse_scheduler_conf
from lapilli.api.constants import DEFAULT_SCHEDULER_NAME
from lapilli.settings import flag


@dataclass(frozen=True, slots=True)
class ExtenderSettings:
    """The scheduler extender: plain HTTP for kube-scheduler, answered by the Lease holder only."""

    enabled: bool = flag("--enable-extender/--disable-extender", True)
    """Serve the scheduler extender and run the scheduling sessions in this process."""
    host: str = flag("--extender-host", "0.0.0.0")
    """Address the extender listens on."""
    port: int = flag("--extender-port", 8080)
    """Plain-HTTP port of /extender/{filter,prioritize,preempt} and /extender/gang/bind."""
    scheduler_conf: Path | None = flag("--scheduler-conf", None)
    """Volcano scheduler configuration (actions, tiers); re-read when it changes. Default: Volcano's."""
    session_period_s: float = flag("--session-period", 1.0)
    """Seconds between scheduling sessions (a change in the cluster starts one sooner)."""
    permit_timeout_s: float = flag("--permit-timeout", 30.0)
    """Seconds a gang may gather at bind; must stay below the bind entry's httpTimeout (60s shipped)."""
    session_process: bool = flag("--session-process/--session-thread", True)
    """Run scheduling sessions in a child process with its own cluster cache, or in a worker thread."""
    leader_elect: bool = flag("--leader-elect/--no-leader-elect", True)
    """Answer extender verbs, and run the controllers, only while holding their coordination.k8s.io Lease, so
    one replica of many acts."""
    lease_namespace: str = flag("--lease-namespace", "lapilli-system")
    """Namespace of the extender's and the controllers' Leases."""
    lease_name: str = flag("--lease-name", "lapilli-extender")
    """Name of the extender's Lease."""
    follow_lease: str | None = flag("--follow-scheduler-lease", None)
    """Hold no Lease of its own: answer while the kube-scheduler beside this process (same hostname: the same
    pod) holds this Lease in --lease-namespace, as the extender sidecar of a dedicated scheduler does."""
    scheduler_names: tuple[str, ...] = flag("--scheduler-name", (DEFAULT_SCHEDULER_NAME,))
    """Pods of these schedulers are Volcano's (as the webhook and the controllers read them)."""
    why_interval_s: float = flag("--why-interval", 30.0)
    """Seconds between explanations written on waiting PodGroups (condition `lapilli.io/Why`); 0 turns them off.
    Each pass costs about one scheduling session of CPU in the verbs' process."""
    sync_timeout_s: float = 60.0
    """How long start-up waits for the cluster cache before the verbs are answered anyway (not ready until
    synced)."""

    def problems(self) -> list[str]:
        """Every reason these settings cannot work (empty when they can)."""
        out: list[str] = []
        if not 0 <= self.port <= 65535:
            out.append(f"--extender-port {self.port} is not a TCP port (0-65535; 0 picks a free one)")
        if self.scheduler_conf is not None:
            if not self.scheduler_conf.is_file():
                out.append(f"--scheduler-conf {self.scheduler_conf}: no such file")
            else:
                try:
                    parse_scheduler_conf(self.scheduler_conf.read_text())
                except ConfError as exc:
                    out.append(f"--scheduler-conf {self.scheduler_conf}: {exc}")
        if self.session_period_s <= 0:
            out.append(f"--session-period {self.session_period_s} must be > 0 seconds")
        if self.why_interval_s < 0:
            out.append(f"--why-interval {self.why_interval_s} must be >= 0 seconds (0: off)")
        if not 0 < self.permit_timeout_s < 60:
            out.append(f"--permit-timeout {self.permit_timeout_s} must be between 0 and the bind httpTimeout (60s)")
        return out
