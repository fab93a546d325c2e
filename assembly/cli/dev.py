"""`lapilli dev up | down | status | kubelet`: the local control plane of DESIGN.md ("Interfaces")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

import click

from assembly.cli.vcctl import request_timeout_option

DEFAULT_STATE_DIR = Path(".lapilli") / "dev"


def _state_dir(value: Path | None) -> Path:
    """--state-dir, else $LAPILLI_DEV_STATE_DIR, else .lapilli/dev under the current directory."""
    if value is not None:
        return value
    env = os.environ.get("LAPILLI_DEV_STATE_DIR")
    return Path(env) if env else DEFAULT_STATE_DIR


_state_option = click.option(
    "--state-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
    help="Where pid files, logs, certificates and the kubeconfig live [default: .lapilli/dev, "
    "or $LAPILLI_DEV_STATE_DIR].",
)


def _wiring(service: bool, extender: bool) -> str:
    if not service:
        return "without the Lapilli service"
    return f"Lapilli service with webhook{' and extender' if extender else ' (no extender yet)'}"


@click.group()
def dev() -> None:
    """A local control plane: etcd, kube-apiserver, kube-scheduler, simulated nodes and kubelet.

    Binaries come from LAPILLI_K8S_BIN=DIR or the cache filled by `make k8s`; etcd from that DIR or PATH.
    """


@dev.command()
@click.option("--nodes", default=8, show_default=True, help="Simulated nodes to create.")
@click.option("--gpus-per-node", default=8, show_default=True, help="nvidia.com/gpu per node.")
@click.option("--cpu", default="64", show_default=True, help="CPU per node (a quantity).")
@click.option("--memory", default="512Gi", show_default=True, help="Memory per node (a quantity).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="Node label (repeatable).")
@click.option("--taint", "taints", multiple=True, metavar="KEY[=VALUE]:EFFECT", help="Node taint (repeatable).")
@click.option("--vgpu", is_flag=True, help="Shared GPUs: nodes register vGPU cards (A100-80GB, every fourth node "
              "A100-40GB in MIG mode) instead of whole nvidia.com/gpu, the device config is created and the service "
              "runs examples/scheduler-conf-vgpu.yaml (deviceshare with vGPU).")
@click.option("--topology", default="", metavar="LABEL=COUNT,...",
              help="A network topology, top tier first with its number of domains (e.g. 'spine=2,leaf=4'): the "
              "nodes are labelled into that tree and HyperNode discovery is turned on (kubectl get hn).")
@click.option("--extender/--no-extender", default=None,
              help="Wire Lapilli in: start `lapilli serve`, register its webhook and point kube-scheduler's "
              "extender at it [default: when `lapilli serve` exists].")
@click.option("--scheduler-conf", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The scheduler conf (Volcano's format) the service runs [default: the shipped "
              "manifests/scheduler/lapilli-scheduler.conf; with --vgpu, examples/scheduler-conf-vgpu.yaml]; checked "
              "before anything starts.")
@_state_option
def up(
    nodes: int, gpus_per_node: int, cpu: str, memory: str, labels: tuple[str, ...], taints: tuple[str, ...],
    vgpu: bool, topology: str, extender: bool | None, scheduler_conf: Path | None, state_dir: Path | None,
) -> None:
    """Start everything in the background; prints `export KUBECONFIG=...` last once it is ready."""
    from assembly.dev import BinariesNotFound, ClusterRunning, ClusterSpec, ComponentFailed, DevCluster, NodeShape
    from assembly.dev.nodes import parse_label, parse_taint
    from assembly.dev.topology import parse_tiers

    if scheduler_conf is not None:
        _check_conf(scheduler_conf)
    try:
        shape = NodeShape(
            cpu=cpu, memory=memory, gpus=gpus_per_node, labels=dict(parse_label(x) for x in labels),
            taints=tuple(parse_taint(t) for t in taints),
        )
        tiers = parse_tiers(topology, nodes) if topology else ()
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    spec = ClusterSpec(state_dir=_state_dir(state_dir), nodes=nodes, shape=shape, extender=extender,
                       topology=tiers, vgpu=vgpu, scheduler_conf=scheduler_conf)
    cluster = DevCluster(spec)

    async def start() -> None:
        try:
            info = await cluster.up()
        finally:
            await cluster.close()
        click.echo(
            f"Kubernetes {info.kubernetes} at {info.server}: {info.nodes} nodes, "
            f"{_wiring(info.service, info.extender)}, ready in {info.ready_s:.1f}s (state in {info.state_dir})",
            err=True,
        )
        if tiers:
            click.echo(f"topology {topology}: nodes labelled {', '.join(k for k, _ in tiers)}; HyperNodes from "
                       "ConfigMap lapilli-system/volcano-controller-configmap (kubectl get hn)", err=True)

    try:
        asyncio.run(start())
    except (BinariesNotFound, ClusterRunning, ComponentFailed) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"export KUBECONFIG={cluster.kubeconfig}")


def _check_conf(path: Path) -> None:
    """Refuse a conf `lapilli serve` would refuse, before anything starts; print what it would leave out."""
    from extender.engine.arguments import ConfError
    from extender.engine.run import parse_scheduler_conf

    try:
        conf = parse_scheduler_conf(path.read_text())
    except (ConfError, OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(str(exc), param_hint="--scheduler-conf") from exc
    for warning in conf.warnings:
        click.echo(f"scheduler conf {path}: {warning}", err=True)


@dev.command()
@_state_option
def down(state_dir: Path | None) -> None:
    """Stop every process of the dev cluster."""
    from assembly.dev import stop_state_dir

    stopped = stop_state_dir(_state_dir(state_dir))
    click.echo(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running")


def _api(kubeconfig: str) -> dict[str, object]:
    """Whether the cluster's kube-apiserver answers through its kubeconfig: its version, or the one line any command
    would fail with (within the request timeout)."""
    from assembly.cli.vcctl import connect, run_client

    try:
        major, minor = run_client(connect(Path(kubeconfig), ""), lambda client: client.server_version())
    except click.ClickException as exc:
        return {"answering": False, "detail": exc.message}
    return {"answering": True, "detail": f"v{major}.{minor}"}


@dev.command()
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@request_timeout_option
@_state_option
def status(output: str, state_dir: Path | None) -> None:
    """Tell what runs, and whether the API server answers. Exit status 0 if every recorded process runs, 1 if none
    do, 2 if only some do."""
    from assembly.dev import status as cluster_status

    report = cluster_status(_state_dir(state_dir))
    running = [p["running"] for p in report["processes"]]
    info = report["cluster"]
    if info and any(running):
        report["api"] = _api(info["kubeconfig"])
    if output == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        if info:
            click.echo(f"cluster: Kubernetes {info['kubernetes']} at {info['server']}, {info['nodes']} nodes, "
                       f"{_wiring(info['service'], info['extender'])}")
            click.echo(f"kubeconfig: {info['kubeconfig']}")
        if "api" in report:
            api = report["api"]
            click.echo(f"kube-apiserver: {'answering' if api['answering'] else 'not answering'}: {api['detail']}")
        if not running:
            click.echo(f"nothing recorded in {report['state_dir']}")
        for proc in report["processes"]:
            click.echo(f"{proc['name']:<16} pid {proc['pid']:<8} {'running' if proc['running'] else 'stopped'}")
    sys.exit(0 if running and all(running) else 1 if not any(running) else 2)


@dev.command(context_settings={"ignore_unknown_options": True})
@click.option("--pid-file", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="Where the running child's pid is written.")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def supervise(pid_file: Path, argv: tuple[str, ...]) -> None:
    """Run ARGV and start it again whenever it dies, as a Deployment would (`dev up` runs the service so)."""
    from assembly.dev.supervise import supervise as run

    sys.exit(run(argv, pid_file))


@dev.command(hidden=False)
@click.option("--kubeconfig", type=click.Path(path_type=Path, dir_okay=False, exists=True), required=True)
@click.option("--ready-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Touched once the kubelet has listed nodes and pods.")
@click.option("--workers", default=64, show_default=True, help="Concurrent pod/node updates.")
@click.option("--heartbeat", default=300.0, show_default=True,
              help="Seconds between heartbeats of a node (at most 20 nodes a second).")
@click.option("--metrics-port", type=int, default=None,
              help="Serve the simulated GPUs' utilisation (DCGM_FI_DEV_GPU_UTIL per pod, from each pod's "
                   "sim.lapilli.io/gpu-util) on http://127.0.0.1:PORT/metrics.")
def kubelet(
    kubeconfig: Path, ready_file: Path | None, workers: int, heartbeat: float, metrics_port: int | None,
) -> None:
    """Run the simulated kubelet for every simulated node until SIGTERM (`dev up` starts it)."""
    from assembly.dev import SimKubelet
    from lapilli.kube import KubeClient, load_kubeconfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def run() -> None:
        loop = asyncio.get_running_loop()
        async with KubeClient(load_kubeconfig(kubeconfig)) as client:
            sim = SimKubelet(client, workers=workers, heartbeat_s=heartbeat, metrics_port=metrics_port)
            task = sim.start()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, task.cancel)
            ready = asyncio.create_task(sim.ready.wait())
            await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
            if ready.done() and ready_file is not None:
                ready_file.touch()
                logging.info("simulated kubelet ready: %d nodes, %d pods", len(sim.nodes.store), len(sim.pods.store))
            with contextlib.suppress(asyncio.CancelledError):
                await task
            logging.info("simulated kubelet stopped: %s", sim.stats.report())

    asyncio.run(run())
