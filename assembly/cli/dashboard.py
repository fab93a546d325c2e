"""`lapilli dashboard [--port PORT]`: a local web view of queues, jobs and why they wait (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import click

from assembly.cli.vcctl import connect, connection_options, run_client
from lapilli.kube import KubeClient


@click.command()
@connection_options
@click.option("--port", default=8765, show_default=True, help="Port on 127.0.0.1 (0 picks a free one).")
@click.option("--conf", "conf_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="scheduler conf to explain with [default: the cluster's, as `lapilli job why`]")
@click.option("-n", "--namespace", default=None,
              help="where to read Pods and PodGroups if you may not read them in all namespaces "
                   "[default: the kubeconfig context's namespace]")
@click.option("--prometheus", "prometheus_url", default=None, metavar="URL",
              help="read the queues' last day from this Prometheus (the service's metrics) [default: the service's "
                   "own history, ConfigMap lapilli-system/lapilli-history]")
def dashboard(master: str, kubeconfig: Path | None, port: int, conf_file: Path | None, namespace: str | None,
              prometheus_url: str | None) -> None:
    """Serve the dashboard with your own kubeconfig until interrupted."""
    from assembly.dashboard.server import DashboardError, serve

    config = connect(kubeconfig, master)

    async def main(client: KubeClient) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await serve(client, port, conf_file,
                    lambda p: click.echo(f"dashboard on http://127.0.0.1:{p}/ (Ctrl-C stops it)"), stop,
                    namespace or config.namespace, prometheus_url)

    # The first reads (the conf, then every kind) fail like any command's: one line, within the request timeout.
    try:
        run_client(config, main)
    except DashboardError as exc:
        raise click.ClickException(str(exc)) from None
