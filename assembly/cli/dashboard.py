"""`lapilli dashboard [--port PORT]`: a local web view of queues, jobs and why they wait (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import click

from assembly.cli.vcctl import connection_options
from lapilli.kube import ConfigError, KubeClient, load_config


@click.command()
@connection_options
@click.option("--port", default=8765, show_default=True, help="Port on 127.0.0.1 (0 picks a free one).")
@click.option("--conf", "conf_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="scheduler conf to explain with [default: the cluster's, as `lapilli job why`]")
@click.option("-n", "--namespace", default=None,
              help="where to read Pods and PodGroups if you may not read them in all namespaces "
                   "[default: the kubeconfig context's namespace]")
def dashboard(master: str, kubeconfig: Path | None, port: int, conf_file: Path | None, namespace: str | None) -> None:
    """Serve the dashboard with your own kubeconfig until interrupted."""
    from assembly.dashboard.server import serve

    try:
        config = load_config(kubeconfig)
    except (ConfigError, OSError) as exc:
        raise click.ClickException(f"cannot load kubeconfig: {exc}") from None
    if master:
        config.server = master.rstrip("/")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        async with KubeClient(config) as client:
            await serve(client, port, conf_file,
                        lambda p: click.echo(f"dashboard on http://127.0.0.1:{p}/ (Ctrl-C stops it)"), stop,
                        namespace or config.namespace)

    asyncio.run(main())
