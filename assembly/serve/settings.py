"""`lapilli serve` settings: one frozen object per process, grouped by component, checked once at start.

Each component of the service owns a group: `webhook` (with admission's `webhook.context.AdmissionSettings`),
`extender` (`extender.service.settings`) and `controllers` (`controller.settings`). The fields are the flags:
`lapilli serve` derives its options from them (`lapilli.settings.flag`) and builds `Settings` back from the
parsed values, so a new flag is one new field with its docstring. `Settings.check()` collects every problem
into one readable `SettingsError` before anything starts.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from controller.settings import ControllerSettings
from extender.service.settings import ExtenderSettings
from lapilli.settings import flag
from webhook.context import AdmissionSettings
from webhook.names import dns1123_label, dns1123_subdomain

DEFAULT_TLS_DIR: Final = Path("/etc/lapilli/tls")


class SettingsError(ValueError):
    """Settings that cannot work; the message lists every problem, one per line."""


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    """The admission webhook, served over TLS on every replica."""

    enabled: bool = flag("--enable-webhook/--disable-webhook", True)
    """Serve the admission webhook in this process (off for the extender beside kube-scheduler; /healthz,
    /readyz and /metrics then move to --metrics-port)."""
    host: str = flag("--webhook-host", "0.0.0.0")
    """Address the webhook listens on."""
    port: int = flag("--webhook-port", 8443)
    """TLS port of the admission paths, /healthz, /readyz and /metrics (Volcano's webhook uses 8443)."""
    tls_cert_file: Path = flag("--tls-cert-file", DEFAULT_TLS_DIR / "tls.crt")
    """Serving certificate (PEM); reloaded when the file changes."""
    tls_key_file: Path = flag("--tls-key-file", DEFAULT_TLS_DIR / "tls.key")
    """Private key of the serving certificate (PEM)."""
    tls_reload_interval_s: float = flag("--tls-reload-interval", 10.0)
    """Seconds between checks of the certificate files for a new pair."""
    ca_bundle_file: Path | None = flag("--ca-bundle-file", None)
    """When set, the webhook configurations' `caBundle` is kept equal to this PEM file (patched at start and
    whenever the file changes)."""
    tls_secret: str | None = flag("--tls-secret", None)
    """NAMESPACE/NAME of a Secret that keeps the serving certificate: made there with its CA at first start,
    re-issued before it expires, and written by the service to --tls-cert-file/--tls-key-file (the CA to
    --ca-bundle-file). No certificate step by hand. Unset: the files are provided."""
    tls_service: str = flag("--tls-service", "lapilli-webhook")
    """The webhook's Service (in the --tls-secret namespace), whose DNS names a made certificate carries."""
    configurations: tuple[str, ...] = flag("--webhook-configuration", ("lapilli-mutating", "lapilli-validating"))
    """Mutating- or ValidatingWebhookConfiguration whose `caBundle` is kept in step (repeatable)."""
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)
    """Volcano's webhook-manager flags: scheduler names, queue depth, root protection, allocated-pods check."""
    cache_sync_timeout_s: float = 60.0
    """How long start-up waits for the Queue/Job/Namespace caches before serving anyway (not ready until synced)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything `lapilli serve` runs with."""

    kubeconfig: Path | None = flag("--kubeconfig", None)
    """Kubeconfig file to reach the API server; default: $KUBECONFIG, in-cluster, ~/.kube/config."""
    log_level: str = flag("--log-level", "INFO")
    """Python logging level: DEBUG, INFO, WARNING or ERROR."""
    metrics_host: str = flag("--metrics-host", "0.0.0.0")
    """Address of plain-HTTP /healthz, /readyz and /metrics while the webhook (their usual port) is disabled."""
    metrics_port: int = flag("--metrics-port", 8081)
    """Port of those, while the webhook is disabled."""
    leader_identity: str = flag("--leader-identity", "")
    """Holder identity in the Leases; default $LAPILLI_LEADER_IDENTITY, else <hostname>_<random>. Give the pod's
    name (downward API): a restarted container then leads again at once instead of waiting out its predecessor's
    lease. Never share one between live replicas."""
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
        if self.webhook.enabled:
            out += _webhook_problems(self.webhook)
        elif not 0 <= self.metrics_port <= 65535:
            out.append(f"--metrics-port {self.metrics_port} is not a TCP port (0-65535; 0 picks a free one)")
        if self.extender.enabled:
            out += self.extender.problems()
        if self.controllers.enabled:
            out += self.controllers.problems()
        out += _lease_problems(self.extender, self.controllers)
        return list(dict.fromkeys(out))  # a flag read by two groups is reported once

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
    if w.tls_secret is None:
        out += _tls_problems(w)
    elif len([part for part in w.tls_secret.split("/") if part]) != 2 or w.tls_secret.count("/") != 1:
        out.append(f"--tls-secret {w.tls_secret!r} is not NAMESPACE/NAME")
    if w.tls_reload_interval_s <= 0:
        out.append(f"--tls-reload-interval {w.tls_reload_interval_s} must be > 0 seconds")
    if w.ca_bundle_file is not None and w.tls_secret is None and not w.ca_bundle_file.is_file():
        out.append(f"--ca-bundle-file {w.ca_bundle_file}: no such file")
    return out + w.admission.problems()


def _lease_problems(e: ExtenderSettings, c: ControllerSettings) -> list[str]:
    leases: dict[str, tuple[str, str]] = {}
    if e.enabled and e.leader_elect and e.follow_lease is None:
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
