"""The Lapilli service (`lapilli serve`) in a dev cluster: the one place that knows how to start and wire it.

`lapilli dev up` and the test fixture start the service once `lapilli serve` is a registered command, as the
real ServiceAccount `lapilli-system/lapilli` (manifests/rbac). The admission webhook is served over TLS on
127.0.0.1 with a certificate made here, and registered with kube-apiserver through `url:` client configs
(there is no Service networking without kube-proxy). kube-scheduler's extender entries are enabled once the
service has an `--extender-port` option. Adjust the flags here when `lapilli serve` grows new ones.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import click

from webhook.certs import generate as generate_certs
from webhook.certs import write_bundle
from webhook.configs import OPT_OUT_LABEL, OPT_OUT_VALUE
from webhook.configs import render as render_webhook_configurations

SERVICE_MODULE: Final = "assembly.serve"
SERVICE_PID_FILE: Final = "service.pid"  # the supervised `lapilli serve` (the pid file of "lapilli" is its supervisor)
READY_PATH: Final = "/readyz"
EXTENDER_PATH: Final = "/extender"
EXTENDER_OPTION: Final = "extender_port"
SCHEDULER_CONF: Final = Path(__file__).resolve().parents[2] / "manifests" / "scheduler" / "lapilli-scheduler.conf"
# Namespaces the webhook must never block (the install labels them the same way).
WEBHOOK_EXEMPT_NAMESPACES: Final = ("kube-system", "lapilli-system")


def serve_options() -> set[str] | None:
    """Parameter names of `lapilli serve`, or None while the command does not exist."""
    if importlib.util.find_spec(SERVICE_MODULE) is None:
        return None
    from assembly.cli import main  # the assembly layer may look at its own CLI

    ctx = click.Context(main)
    if "serve" not in main.list_commands(ctx):
        return None
    command = main.get_command(ctx, "serve")
    return {p.name for p in command.params if p.name} if command is not None else None


def service_available() -> bool:
    return serve_options() is not None


def lapilli_argv(*args: str) -> list[str]:
    """How to run a `lapilli` subcommand with this very interpreter (the venv's console script if present)."""
    script = Path(sys.executable).with_name("lapilli")
    if script.is_file():
        return [str(script), *args]
    return [sys.executable, "-c", "import sys; from assembly.cli import main; sys.exit(main())", *args]


def supervised(argv: list[str], state_dir: Path) -> list[str]:
    """`argv` under `lapilli dev supervise`, which restarts it when it dies (see assembly/dev/supervise.py)."""
    return lapilli_argv("dev", "supervise", "--pid-file", str(state_dir / SERVICE_PID_FILE), "--", *argv)


def service_pid(state_dir: Path) -> int | None:
    """The running `lapilli serve` of a dev cluster (not its supervisor), or None."""
    from assembly.dev.supervise import read_pid

    return read_pid(state_dir / SERVICE_PID_FILE)


@dataclass(frozen=True, slots=True)
class ServicePlan:
    """How the service runs in one dev cluster."""

    argv: list[str]
    ready_url: str
    webhook_configurations: list[dict[str, Any]]
    extender_url: str | None  # None: the service has no extender yet; kube-scheduler runs without one


def plan_service(
    state_dir: Path, kubeconfig: Path, webhook_port: int, extender_port: int, extra_args: tuple[str, ...] = ()
) -> ServicePlan | None:
    """Certificates written, command line and webhook configurations ready; None if there is no service.
    `extra_args` are appended to `lapilli serve` (benchmarks switch components off with them)."""
    options = serve_options()
    if options is None:
        return None
    tls = write_bundle(generate_certs(["127.0.0.1", "localhost"]), state_dir / "webhook-tls")
    webhook_base = f"https://127.0.0.1:{webhook_port}"
    argv = lapilli_argv(
        "serve", "--kubeconfig", str(kubeconfig),
        "--webhook-host", "127.0.0.1", "--webhook-port", str(webhook_port),
        "--tls-cert-file", str(tls["tls.crt"]), "--tls-key-file", str(tls["tls.key"]),
    )
    extender_url = None
    if EXTENDER_OPTION in options:
        argv += ["--extender-host", "127.0.0.1", "--extender-port", str(extender_port)]
        if SCHEDULER_CONF.is_file():
            argv += ["--scheduler-conf", str(SCHEDULER_CONF)]
        extender_url = f"http://127.0.0.1:{extender_port}{EXTENDER_PATH}"
    return ServicePlan(
        argv=[*argv, *extra_args],
        ready_url=f"{webhook_base}{READY_PATH}",
        webhook_configurations=render_webhook_configurations(url=webhook_base, ca_bundle=tls["ca.crt"].read_bytes()),
        extender_url=extender_url,
    )


def exempt_namespace_patch() -> dict[str, Any]:
    """The label that keeps the webhook away from a namespace."""
    return {"metadata": {"labels": {OPT_OUT_LABEL: OPT_OUT_VALUE}}}
