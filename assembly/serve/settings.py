"""`lapilli serve` settings: one frozen object per process, grouped by component, checked once at start.

Each component of the service owns a group (`webhook` today; the extender and the controllers add theirs next
to it); `Settings.check()` collects every problem into one readable `SettingsError` before anything starts.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from controller.settings import ControllerSettings
from extender.engine.conf import ConfError
from extender.engine.run import parse_scheduler_conf
from webhook.context import AdmissionSettings
from webhook.names import dns1123_label, dns1123_subdomain
from webhook.tls import server_context

DEFAULT_TLS_DIR: Final = Path("/etc/lapilli/tls")


class SettingsError(ValueError):
    """Settings that cannot work; the message lists every problem, one per line."""


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """The admission webhook, served over TLS on every replica."""

    host: str = "0.0.0.0"
    """Address to listen on."""
    port: int = 8443
    """TLS port of the admission paths, /healthz, /readyz and /metrics (Volcano's webhook uses 8443)."""
    tls_cert_file: Path = DEFAULT_TLS_DIR / "tls.crt"
    """Serving certificate (PEM); reloaded when it changes."""
    tls_key_file: Path = DEFAULT_TLS_DIR / "tls.key"
    """Its private key (PEM)."""
    tls_reload_interval_s: float = 10.0
    """How often the certificate files are checked for a new pair."""
    ca_bundle_file: Path | None = None
    """When set, the webhook configurations' `caBundle` is kept equal to this PEM file (patched at start and
    whenever the file changes)."""
    configurations: tuple[str, ...] = ("lapilli-mutating", "lapilli-validating")
    """Names of the Mutating- and ValidatingWebhookConfiguration whose `caBundle` is kept in step."""
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)
    """Volcano's webhook-manager flags: scheduler names, queue depth, root protection, allocated-pods check."""
    cache_sync_timeout_s: float = 60.0
    """How long start-up waits for the Queue/Job/Namespace caches before serving anyway (not ready until synced)."""


@dataclass(frozen=True, slots=True)
class ExtenderSettings:
    """The scheduler extender for kube-scheduler (HTTP, or TLS with client certificates), answered by the Lease
    holder only."""

    enabled: bool = True
    """Serve the extender (and run the scheduling session loop) in this process."""
    host: str = "127.0.0.1"
    """Address the extender listens on: loopback (kube-scheduler as a sidecar in the same pod) unless set."""
    port: int = 8080
    """Port of /extender/{filter,prioritize,preempt} and /extender/gang/bind."""
    tls_cert_file: Path | None = None
    """Serving certificate (PEM) of the extender port; with it the port speaks TLS only. Reloaded on change."""
    tls_key_file: Path | None = None
    """Its private key (PEM)."""
    client_ca_file: Path | None = None
    """CA (PEM) that signs kube-scheduler's client certificate (its extender `tlsConfig.certFile`): with it,
    every connection must present a certificate this CA signed. Needs the serving pair."""
    scheduler_conf: Path | None = None
    """Volcano scheduler configuration (actions, tiers); re-read when it changes. None: Volcano's default."""
    session_period_s: float = 1.0
    """Seconds between scheduling sessions (a change in the cluster starts one sooner)."""
    permit_timeout_s: float = 30.0
    """How long a gang may gather at bind; must stay below the bind entry's httpTimeout (60s shipped)."""
    session_process: bool = True
    """Run sessions in a child process with its own cluster cache (else in a worker thread of this one)."""
    leader_elect: bool = True
    """Hold a coordination.k8s.io Lease so only one replica answers the verbs."""
    lease_namespace: str = "lapilli-system"
    """Namespace of the Lease (the controllers' Lease is kept there too)."""
    lease_name: str = "lapilli-extender"
    """Name of the Lease."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything `lapilli serve` runs with."""

    kubeconfig: Path | None = None
    """Kubeconfig to reach the API server; None: $KUBECONFIG, the in-cluster service account, ~/.kube/config."""
    log_level: str = "INFO"
    """Python logging level name."""
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    extender: ExtenderSettings = field(default_factory=ExtenderSettings)
    controllers: ControllerSettings = field(default_factory=ControllerSettings)

    def problems(self) -> list[str]:
        """Every reason these settings cannot work (empty when they can)."""
        out: list[str] = []
        if logging.getLevelName(self.log_level.upper()) == f"Level {self.log_level.upper()}":
            out.append(f"--log-level {self.log_level!r} is not a logging level (DEBUG, INFO, WARNING, ERROR)")
        if self.kubeconfig is not None and not self.kubeconfig.is_file():
            out.append(f"--kubeconfig {self.kubeconfig}: no such file")
        out += _webhook_problems(self.webhook)
        if self.extender.enabled:
            out += _extender_problems(self.extender)
        if self.controllers.enabled:
            out += self.controllers.problems()
        out += _lease_problems(self.extender, self.controllers)
        return out

    def check(self) -> Settings:
        """Raise `SettingsError` listing every problem; return self when there is none."""
        if problems := self.problems():
            raise SettingsError("\n".join(problems))
        return self


def _tls_problems(w: WebhookSettings) -> list[str]:
    missing = [
        f"--{flag} {path}: no such file"
        for flag, path in (("tls-cert-file", w.tls_cert_file), ("tls-key-file", w.tls_key_file))
        if not path.is_file()
    ]
    if missing:
        return missing
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(w.tls_cert_file, w.tls_key_file)
    except (ssl.SSLError, OSError) as exc:
        return [f"--tls-cert-file/--tls-key-file do not hold a matching PEM certificate and key: {exc}"]
    return []


def _webhook_problems(w: WebhookSettings) -> list[str]:
    out: list[str] = []
    if not 0 <= w.port <= 65535:
        out.append(f"--webhook-port {w.port} is not a TCP port (0-65535; 0 picks a free one)")
    out += _tls_problems(w)
    if w.tls_reload_interval_s <= 0:
        out.append(f"--tls-reload-interval {w.tls_reload_interval_s} must be > 0 seconds")
    if w.ca_bundle_file is not None and not w.ca_bundle_file.is_file():
        out.append(f"--ca-bundle-file {w.ca_bundle_file}: no such file")
    a = w.admission
    if not a.scheduler_names:
        out.append("--scheduler-name must be given at least once")
    out += [f"--scheduler-name {n!r} is not a valid name" for n in a.scheduler_names if dns1123_subdomain(n)]
    if a.max_queue_depth < 1:
        out.append(f"--max-queue-depth {a.max_queue_depth} must be >= 1")
    return out


def _lease_problems(e: ExtenderSettings, c: ControllerSettings) -> list[str]:
    leases: dict[str, tuple[str, str]] = {}
    if e.enabled and e.leader_elect:
        leases["--lease-name"] = (e.lease_namespace, e.lease_name)
    if c.enabled and c.leader_elect:
        leases["--controllers-lease-name"] = (c.lease_namespace, c.lease_name)
    out: list[str] = []
    for namespace in sorted({ns for ns, _ in leases.values()}):
        if dns1123_label(namespace):
            out.append(f"--lease-namespace {namespace!r} is not a valid namespace name")
    out += [f"{flag} {name!r} is not a valid name" for flag, (_, name) in leases.items() if dns1123_subdomain(name)]
    if len(leases) == 2 and len(set(leases.values())) == 1:
        out.append("--lease-name and --controllers-lease-name must differ: the extender and the controllers each "
                   "need a Lease of their own (one replica may lead one and not the other)")
    return out


def _extender_tls_problems(e: ExtenderSettings) -> list[str]:
    if e.tls_cert_file is None and e.tls_key_file is None:
        return ["--extender-client-ca-file needs --extender-tls-cert-file and --extender-tls-key-file (client "
                "certificates are only asked for over TLS)"] if e.client_ca_file is not None else []
    if e.tls_cert_file is None or e.tls_key_file is None:
        return ["--extender-tls-cert-file and --extender-tls-key-file go together"]
    files = (("extender-tls-cert-file", e.tls_cert_file), ("extender-tls-key-file", e.tls_key_file),
             ("extender-client-ca-file", e.client_ca_file))
    missing = [f"--{flag} {path}: no such file" for flag, path in files if path is not None and not path.is_file()]
    if missing:
        return missing
    try:
        extender_tls_context(e)
    except (ssl.SSLError, OSError, ValueError) as exc:
        return [f"--extender-tls-cert-file/--extender-tls-key-file/--extender-client-ca-file: {exc}"]
    return []


def extender_tls_context(e: ExtenderSettings) -> ssl.SSLContext | None:
    """The extender port's TLS context (None: plain HTTP): TLS >= 1.2 with the serving pair, and with a client
    CA every handshake must present a certificate that CA signed (kube-scheduler's `tlsConfig.certFile`)."""
    if e.tls_cert_file is None or e.tls_key_file is None:
        return None
    context = server_context(e.tls_cert_file, e.tls_key_file)
    if e.client_ca_file is not None:
        context.load_verify_locations(cafile=e.client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _extender_problems(e: ExtenderSettings) -> list[str]:
    out: list[str] = []
    if not 0 <= e.port <= 65535:
        out.append(f"--extender-port {e.port} is not a TCP port (0-65535; 0 picks a free one)")
    out += _extender_tls_problems(e)
    if e.scheduler_conf is not None:
        if not e.scheduler_conf.is_file():
            out.append(f"--scheduler-conf {e.scheduler_conf}: no such file")
        else:
            try:
                parse_scheduler_conf(e.scheduler_conf.read_text())
            except ConfError as exc:
                out.append(f"--scheduler-conf {e.scheduler_conf}: {exc}")
    if e.session_period_s <= 0:
        out.append(f"--session-period {e.session_period_s} must be > 0 seconds")
    if not 0 < e.permit_timeout_s < 60:
        out.append(f"--permit-timeout {e.permit_timeout_s} must be between 0 and the bind httpTimeout (60s)")
    return out
