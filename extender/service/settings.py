"""Settings of the scheduler extender (one frozen group of `lapilli serve`'s settings; its fields are its flags)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from extender.engine.conf import ConfError
from extender.engine.run import parse_scheduler_conf
from extender.service.idle.settings import IdleGpuSettings
from lapilli.api.constants import DEFAULT_SCHEDULER_NAME
from lapilli.settings import flag


@dataclass(frozen=True, slots=True)
class ExtenderSettings:
    """The scheduler extender for kube-scheduler (HTTP, or TLS with client certificates), answered by the Lease
    holder only."""

    enabled: bool = flag("--enable-extender/--disable-extender", True)
    """Serve the scheduler extender and run the scheduling sessions in this process."""
    host: str = flag("--extender-host", "127.0.0.1")
    """Address the extender listens on: loopback (kube-scheduler beside the service in its pod) unless set."""
    port: int = flag("--extender-port", 8080)
    """Port of /extender/{filter,prioritize,preempt} and /extender/gang/bind."""
    tls_cert_file: Path | None = flag("--extender-tls-cert-file", None)
    """Serve the extender port over TLS with this certificate (PEM); reloaded when the file changes."""
    tls_key_file: Path | None = flag("--extender-tls-key-file", None)
    """Private key of the extender's serving certificate (PEM)."""
    client_ca_file: Path | None = flag("--extender-client-ca-file", None)
    """Require a client certificate signed by this CA (PEM) on the extender port: kube-scheduler's extender
    tlsConfig.certFile. Needs the serving pair."""
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
    history_interval_s: float = flag("--history-interval", 300.0)
    """Seconds between samples of each queue's GPUs allocated and deserved, kept for a day with when each job started
    in ConfigMap lapilli-system/lapilli-history (the dashboard's charts); 0 turns it off."""
    idle_gpu: IdleGpuSettings = field(default_factory=IdleGpuSettings)
    """Idle-GPU reclaim (off by default)."""
    sync_timeout_s: float = 60.0
    """How long start-up waits for the cluster cache before the verbs are answered anyway (not ready until
    synced)."""

    def problems(self) -> list[str]:
        """Every reason these settings cannot work (empty when they can)."""
        out: list[str] = []
        if not 0 <= self.port <= 65535:
            out.append(f"--extender-port {self.port} is not a TCP port (0-65535; 0 picks a free one)")
        out += self._tls_problems()
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
        if self.history_interval_s < 0:
            out.append(f"--history-interval {self.history_interval_s} must be >= 0 seconds (0: off)")
        if self.why_interval_s < 0:
            out.append(f"--why-interval {self.why_interval_s} must be >= 0 seconds (0: off)")
        if not 0 < self.permit_timeout_s < 60:
            out.append(f"--permit-timeout {self.permit_timeout_s} must be between 0 and the bind httpTimeout (60s)")
        return out + self.idle_gpu.problems()

    def _tls_problems(self) -> list[str]:
        if self.tls_cert_file is None and self.tls_key_file is None:
            if self.client_ca_file is not None:
                return ["--extender-client-ca-file needs --extender-tls-cert-file and --extender-tls-key-file "
                        "(client certificates are only asked for over TLS)"]
            return []
        if self.tls_cert_file is None or self.tls_key_file is None:
            return ["--extender-tls-cert-file and --extender-tls-key-file go together"]
        files = (("--extender-tls-cert-file", self.tls_cert_file), ("--extender-tls-key-file", self.tls_key_file),
                 ("--extender-client-ca-file", self.client_ca_file))
        missing = [f"{flag_} {path}: no such file" for flag_, path in files if path is not None and not path.is_file()]
        if missing:
            return missing
        try:
            self.tls_context()
        except (ssl.SSLError, OSError, ValueError) as exc:
            return [f"--extender-tls-cert-file/--extender-tls-key-file/--extender-client-ca-file: {exc}"]
        return []

    def tls_context(self) -> ssl.SSLContext | None:
        """The extender port's TLS context (None: plain HTTP): TLS >= 1.2 with the serving pair and, with a
        client CA, a certificate that CA signed required of every client (kube-scheduler's tlsConfig)."""
        if self.tls_cert_file is None or self.tls_key_file is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        if self.client_ca_file is not None:
            context.load_verify_locations(cafile=self.client_ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
        return context
