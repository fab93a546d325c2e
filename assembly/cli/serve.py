"""`lapilli serve`: run the Lapilli service (the container's command)."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from assembly.serve import ControllerSettings, ExtenderSettings, Settings, SettingsError, WebhookSettings
from assembly.serve import serve as run_service
from assembly.serve.settings import DEFAULT_TLS_DIR
from webhook.context import AdmissionSettings

_PATH = click.Path(path_type=Path)


@click.command("serve")
@click.option("--kubeconfig", type=_PATH, help="Kubeconfig file; default $KUBECONFIG, in-cluster, ~/.kube/config.")
@click.option("--webhook-host", default="0.0.0.0", show_default=True, help="Address the webhook listens on.")
@click.option(
    "--webhook-port", default=8443, show_default=True, help="TLS port: admission, /healthz, /readyz, /metrics."
)
@click.option(
    "--tls-cert-file",
    type=_PATH,
    default=DEFAULT_TLS_DIR / "tls.crt",
    show_default=True,
    help="Serving certificate (PEM); reloaded when the file changes.",
)
@click.option(
    "--tls-key-file",
    type=_PATH,
    default=DEFAULT_TLS_DIR / "tls.key",
    show_default=True,
    help="Private key of the serving certificate (PEM).",
)
@click.option("--tls-reload-interval", default=10.0, show_default=True, help="Seconds between certificate checks.")
@click.option(
    "--ca-bundle-file",
    type=_PATH,
    default=None,
    help="Keep the webhook configurations' caBundle equal to this CA file (patched at start and on change).",
)
@click.option(
    "--webhook-configuration",
    "configurations",
    multiple=True,
    default=("lapilli-mutating", "lapilli-validating"),
    show_default=True,
    help="Webhook configuration whose caBundle is kept (repeatable).",
)
@click.option(
    "--scheduler-name",
    "scheduler_names",
    multiple=True,
    default=("volcano",),
    show_default=True,
    help="Scheduler name(s) of Volcano pods; the first is the Job default (repeatable).",
)
@click.option("--max-queue-depth", default=5, show_default=True, help="Deepest queue hierarchy allowed.")
@click.option(
    "--enable-root-queue-protection/--disable-root-queue-protection",
    default=True,
    show_default=True,
    help="Refuse changes to the root queue's capability, deserved and guarantee.",
)
@click.option(
    "--enable-queue-allocated-pods-check", is_flag=True, help="Refuse deleting a queue that still has allocated pods."
)
@click.option("--enable-extender/--disable-extender", default=True, show_default=True,
              help="Serve the scheduler extender and run the scheduling sessions in this process.")
@click.option("--extender-host", default="127.0.0.1", show_default=True,
              help="Address the extender listens on (loopback: kube-scheduler runs beside it in the pod).")
@click.option("--extender-port", default=8080, show_default=True,
              help="Port of /extender/{filter,prioritize,preempt} and /extender/gang/bind.")
@click.option("--extender-tls-cert-file", type=_PATH, default=None,
              help="Serve the extender port over TLS with this certificate (PEM); reloaded when the file changes.")
@click.option("--extender-tls-key-file", type=_PATH, default=None, help="Private key of that certificate (PEM).")
@click.option("--extender-client-ca-file", type=_PATH, default=None,
              help="Require a client certificate signed by this CA (kube-scheduler's extender tlsConfig.certFile).")
@click.option("--scheduler-conf", type=_PATH, default=None,
              help="Volcano scheduler configuration (actions, tiers); re-read on change. Default: Volcano's.")
@click.option("--session-period", default=1.0, show_default=True, help="Seconds between scheduling sessions.")
@click.option("--permit-timeout", default=30.0, show_default=True,
              help="Seconds a gang may gather at bind (below the bind entry's httpTimeout).")
@click.option("--session-process/--session-thread", default=True, show_default=True,
              help="Run scheduling sessions in a child process (own cluster cache) or in a worker thread.")
@click.option("--leader-elect/--no-leader-elect", default=True, show_default=True,
              help="Answer extender verbs, and run the controllers, only while holding their Lease.")
@click.option("--lease-namespace", default="lapilli-system", show_default=True,
              help="Namespace of the extender's and the controllers' Leases.")
@click.option("--lease-name", default="lapilli-extender", show_default=True, help="Name of the extender's Lease.")
@click.option("--controllers-lease-name", default="lapilli-controllers", show_default=True,
              help="Name of the controllers' Lease (Volcano's controller manager: vc-controller-manager).")
@click.option("--enable-controllers/--disable-controllers", default=True, show_default=True,
              help="Run the Job, Queue and PodGroup controllers (Volcano's vc-controller-manager) in this process.")
@click.option("--controller-workers", default=8, show_default=True, help="Volcano Jobs synced concurrently.")
@click.option("--controller-pod-concurrency", default=64, show_default=True,
              help="Pod creations and deletions in flight at once, across all Jobs.")
@click.option("--max-requeue-num", default=15, show_default=True,
              help="Failed attempts at one Job request before the Job is terminated (-1: retry forever).")
@click.option("--inherit-owner-annotations/--no-inherit-owner-annotations", default=True, show_default=True,
              help="PodGroups of plain pods copy the pod owner's volcano.sh/* annotations.")
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR.")
def serve(
    kubeconfig: Path | None,
    webhook_host: str,
    webhook_port: int,
    tls_cert_file: Path,
    tls_key_file: Path,
    tls_reload_interval: float,
    ca_bundle_file: Path | None,
    configurations: tuple[str, ...],
    scheduler_names: tuple[str, ...],
    max_queue_depth: int,
    enable_root_queue_protection: bool,
    enable_queue_allocated_pods_check: bool,
    enable_extender: bool,
    extender_host: str,
    extender_port: int,
    extender_tls_cert_file: Path | None,
    extender_tls_key_file: Path | None,
    extender_client_ca_file: Path | None,
    scheduler_conf: Path | None,
    session_period: float,
    permit_timeout: float,
    session_process: bool,
    leader_elect: bool,
    lease_namespace: str,
    lease_name: str,
    controllers_lease_name: str,
    enable_controllers: bool,
    controller_workers: int,
    controller_pod_concurrency: int,
    max_requeue_num: int,
    inherit_owner_annotations: bool,
    log_level: str,
) -> None:
    """Serve Volcano's admission webhook (Jobs, Queues, PodGroups, Pods) over TLS, with /healthz, /readyz
    and /metrics on the same port, and the scheduler extender (filter, prioritize, bind with the gang permit
    cache, preempt) with its scheduling session loop on the extender port, and Volcano's controllers (Jobs,
    Queues, PodGroups, Commands). Runs until SIGTERM or SIGINT."""
    admission = AdmissionSettings(
        scheduler_names=scheduler_names,
        max_queue_depth=max_queue_depth,
        root_queue_protection=enable_root_queue_protection,
        queue_allocated_pods_check=enable_queue_allocated_pods_check,
    )
    webhook = WebhookSettings(
        host=webhook_host,
        port=webhook_port,
        tls_cert_file=tls_cert_file,
        tls_key_file=tls_key_file,
        tls_reload_interval_s=tls_reload_interval,
        ca_bundle_file=ca_bundle_file,
        configurations=configurations,
        admission=admission,
    )
    extender = ExtenderSettings(
        enabled=enable_extender,
        host=extender_host,
        port=extender_port,
        tls_cert_file=extender_tls_cert_file,
        tls_key_file=extender_tls_key_file,
        client_ca_file=extender_client_ca_file,
        scheduler_conf=scheduler_conf,
        session_period_s=session_period,
        permit_timeout_s=permit_timeout,
        session_process=session_process,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=lease_name,
    )
    controllers = ControllerSettings(
        enabled=enable_controllers,
        job_workers=controller_workers,
        pod_concurrency=controller_pod_concurrency,
        max_requeue=max_requeue_num,
        scheduler_names=scheduler_names,
        inherit_owner_annotations=inherit_owner_annotations,
        leader_elect=leader_elect,
        lease_namespace=lease_namespace,
        lease_name=controllers_lease_name,
    )
    settings = Settings(
        kubeconfig=kubeconfig, log_level=log_level, webhook=webhook, extender=extender, controllers=controllers
    )
    try:
        settings.check()
    except SettingsError as exc:
        raise click.UsageError(f"cannot start:\n{exc}") from None
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_main(settings))
    except Exception as exc:  # the edge of the process: one readable line, the traceback at debug level
        logging.getLogger("lapilli.serve").debug("fatal", exc_info=True)
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


async def _main(settings: Settings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await run_service(settings, stop)
