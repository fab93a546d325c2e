"""The Lapilli service (`lapilli serve`) in a dev cluster: the one place that knows how to start and wire it.

`lapilli dev up` and the test fixture start the service once `lapilli serve` is a registered command, as the
real ServiceAccount `lapilli-system/lapilli` (manifests/rbac). The admission webhook is served over TLS on
127.0.0.1 with a certificate made here, and registered with kube-apiserver through `url:` client configs
(there is no Service networking without kube-proxy). kube-scheduler's extender entries are enabled once the
service has an `--extender-port` option. Adjust the flags here when `lapilli serve` grows new ones.
"""

from __future__ import annotations

import importlib.util
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import click

from assembly.dev.bootstrap import SERVICE_NAMESPACE
from controller.hypernodes.config import CONFIGMAP_NAME
from webhook.certs import generate as generate_certs
from webhook.certs import generate_ca, issue_client_cert, write_bundle
from webhook.configs import OPT_OUT_LABEL, OPT_OUT_VALUE
from webhook.configs import render as render_webhook_configurations

SERVICE_MODULE: Final = "assembly.serve"
SERVICE_PID_FILE: Final = "service.pid"  # the supervised `lapilli serve` (the pid file of "lapilli" is its supervisor)
READY_PATH: Final = "/readyz"
EXTENDER_PATH: Final = "/extender"
EXTENDER_OPTION: Final = "extender_port"
EXTENDER_TLS_OPTION: Final = "extender_client_ca_file"
EXTENDER_TLS_DIR: Final = "extender-tls"
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
    extender_tls: dict[str, str] | None = None  # kube-scheduler's extender tlsConfig (certFile, keyFile, caFile)


def plan_service(
    state_dir: Path, kubeconfig: Path, webhook_port: int, extender_port: int, extra_args: tuple[str, ...] = (),
    scheduler_conf: Path | None = None, *, extender_over_tls: bool = True,
) -> ServicePlan | None:
    """Certificates written, command line and webhook configurations ready; None if there is no service.
    `extra_args` are appended to `lapilli serve` (benchmarks switch components off with them); `scheduler_conf` is
    the scheduler conf it runs (None: the shipped one); `extender_over_tls` False: the extender port on plain HTTP."""
    options = serve_options()
    if options is None:
        return None
    tls = write_bundle(generate_certs(["127.0.0.1", "localhost"]), state_dir / "webhook-tls")
    webhook_base = f"https://127.0.0.1:{webhook_port}"
    argv = lapilli_argv(
        "serve", "--kubeconfig", str(kubeconfig),
        "--webhook-host", "127.0.0.1", "--webhook-port", str(webhook_port),
        "--tls-cert-file", str(tls["tls.crt"]), "--tls-key-file", str(tls["tls.key"]),
        # Discovery follows this ConfigMap once someone creates it (`lapilli dev up --topology` does).
        "--hypernode-discovery-configmap", f"{SERVICE_NAMESPACE}/{CONFIGMAP_NAME}",
    )
    extender_url, extender_tls = None, None
    if EXTENDER_OPTION in options:
        argv += ["--extender-host", "127.0.0.1", "--extender-port", str(extender_port)]
        conf = scheduler_conf or SCHEDULER_CONF
        if conf.is_file():
            argv += ["--scheduler-conf", str(conf.resolve())]
        scheme = "http"
        if extender_over_tls and EXTENDER_TLS_OPTION in options:
            # As a production install should run it: TLS, and only kube-scheduler's client certificate gets in.
            files = write_extender_tls(state_dir / EXTENDER_TLS_DIR)
            argv += ["--extender-tls-cert-file", str(files["tls.crt"]), "--extender-tls-key-file",
                     str(files["tls.key"]), "--extender-client-ca-file", str(files["client-ca.crt"])]
            extender_tls = {"certFile": str(files["client.crt"]), "keyFile": str(files["client.key"]),
                            "caFile": str(files["ca.crt"])}
            scheme = "https"
        extender_url = f"{scheme}://127.0.0.1:{extender_port}{EXTENDER_PATH}"
    return ServicePlan(
        argv=[*argv, *extra_args],
        ready_url=f"{webhook_base}{READY_PATH}",
        # Resource groups steer pods of any kind: the mutating pod webhook must then see them all.
        webhook_configurations=render_webhook_configurations(url=webhook_base, ca_bundle=tls["ca.crt"].read_bytes(),
                                                             all_pods="--admission-conf" in extra_args),
        extender_url=extender_url,
        extender_tls=extender_tls,
    )


def write_extender_tls(directory: Path) -> dict[str, Path]:
    """The extender port's serving bundle for 127.0.0.1 (ca.crt, tls.crt, tls.key) and kube-scheduler's client
    pair (client.crt, client.key) signed by a CA of its own (client-ca.crt)."""
    files = write_bundle(generate_certs(["127.0.0.1", "localhost"]), directory)
    client_ca, client_ca_key = generate_ca("lapilli-dev-extender-client-ca")
    cert, key = issue_client_cert(client_ca, client_ca_key, "system:kube-scheduler")
    for name, data, mode in (("client-ca.crt", client_ca, 0o644), ("client.key", key, 0o600),
                             ("client.crt", cert, 0o644)):
        path = directory / name
        path.touch(mode=mode)
        path.write_bytes(data)
        files[name] = path
    return files


def extender_client_ssl(state_dir: Path) -> ssl.SSLContext:
    """What kube-scheduler presents to a dev cluster's extender port: for tests that call the verbs themselves."""
    directory = state_dir / EXTENDER_TLS_DIR
    context = ssl.create_default_context(cafile=directory / "ca.crt")
    context.load_cert_chain(directory / "client.crt", directory / "client.key")
    return context


def exempt_namespace_patch() -> dict[str, Any]:
    """The label that keeps the webhook away from a namespace."""
    return {"metadata": {"labels": {OPT_OUT_LABEL: OPT_OUT_VALUE}}}
