"""`lapilli queue create|list|get|delete|operate` — vcctl's queue verbs, same flags and columns.

Counterpart: `pkg/cli/queue/*.go`. `list` and `get` count PodGroups per phase from the PodGroups themselves, as
vcctl does since the queue controller stopped persisting the counters. `operate -a open|close` creates an
OpenQueue / CloseQueue Command for the controller; `-a update -w N` patches the weight.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import click

from assembly.cli.vcctl import QUEUE_COMMAND_NAMESPACE, connection_options, make_command, run_with_client
from lapilli.api import Action
from lapilli.kube import KubeClient
from lapilli.kube.resources import COMMANDS, PODGROUPS, QUEUES
from lapilli.meta import Obj, annotations_of, name_of
from lapilli.usage import shown_usage

HEADER: Final = ("Name", "Weight", "State", "Inqueue", "Pending", "Running", "Unknown", "Completed")
_PHASES: Final = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
_ACTIONS: Final = {"open": Action.OPEN_QUEUE, "close": Action.CLOSE_QUEUE}



def podgroup_stats(podgroups: Iterable[Obj]) -> dict[str, dict[str, int]]:
    """queue -> phase -> PodGroups (`PodGroupStatistics`; no phase yet counts as Pending)."""
    stats: dict[str, dict[str, int]] = {}
    for pg in podgroups:
        queue = str((pg.get("spec") or {}).get("queue") or "default")
        phase = str((pg.get("status") or {}).get("phase") or "Pending")
        per = stats.setdefault(queue, dict.fromkeys(_PHASES, 0))
        if phase in per:
            per[phase] += 1
    return stats


def format_queues(queues: Iterable[Obj], stats: Mapping[str, Mapping[str, int]],
                  shares: Mapping[str, float] | None = None, now: float | None = None,
                  gpu_memory: Mapping[str, float] | None = None) -> str:
    """`PrintQueues`: `%-25s%-8s...` header and one row per queue (PodGroups per phase: the queue's jobs), then
    Lapilli's columns: the queue's share (allocated / deserved) as the scheduler computes it now, `-` unknown, and
    its decayed usage as the scheduler's leader last sampled it, decayed to `now` (fairshare; `-` without); when
    some queue's pods hold shared GPUs, the GPU memory their cards hold (vGPU, GB)."""
    now = time.time() if now is None else now
    shared = {k: v for k, v in (gpu_memory or {}).items() if v > 0}
    lines = ["".join(f"{h:<{25 if i == 0 else 8}}" for i, h in enumerate(HEADER)) + " Share  Usage(decayed)"
             + ("  vGPU mem" if shared else "")]
    for queue in queues:
        name = name_of(queue)
        per = stats.get(name) or dict.fromkeys(_PHASES, 0)
        weight = int((queue.get("spec") or {}).get("weight") or 0)
        state = str((queue.get("status") or {}).get("state") or "")
        counts = "".join(f"{per[p]:<8}" for p in _PHASES)
        share = (shares or {}).get(name)
        shown = "-" if share is None else f"{share:.2f}"
        usage = shown_usage(annotations_of(queue), now)
        line = f"{name:<25}{weight:<8}{state:<8}{counts}  {shown:<5}  {usage}"
        if shared:
            line = f"{line:<{len(lines[0]) - len('  vGPU mem')}}  {shared.get(name, 0):g} GB"
        lines.append(line)
    return "\n".join(lines) + "\n"


@click.group("queue")
def queue() -> None:
    """Volcano queue operations (vcctl queue)."""


@queue.command("create")
@connection_options
@click.option("-n", "--name", default="test", show_default=True, help="the name of queue")
@click.option("-w", "--weight", default=1, show_default=True, help="the weight of the queue")
@click.option("-S", "--state", default="Open", show_default=True, help="the state of queue")
def create(master: str, kubeconfig: Path | None, name: str, weight: int, state: str) -> None:
    """Create a queue."""
    body = {"apiVersion": QUEUES.api_version, "kind": QUEUES.kind, "metadata": {"name": name},
            "spec": {"weight": weight}, "status": {"state": state}}

    async def work(client: KubeClient) -> None:
        await client.create(QUEUES, body)

    run_with_client(kubeconfig, master, work)


@queue.command("delete")
@connection_options
@click.option("-n", "--name", default="", help="the name of queue")
def delete(master: str, kubeconfig: Path | None, name: str) -> None:
    """Delete a queue."""
    if not name:
        raise click.UsageError("Queue name must be specified")

    async def work(client: KubeClient) -> None:
        await client.delete(QUEUES, name)

    run_with_client(kubeconfig, master, work)


async def _stats(client: KubeClient) -> dict[str, dict[str, int]]:
    return podgroup_stats((await client.list(PODGROUPS)).items)


async def _shares(client: KubeClient) -> tuple[dict[str, float], dict[str, float]]:
    """Each queue's share, and the GPU memory its pods' shared cards hold (GB), from one session of the scheduler's
    engine over the cluster, with the cluster's conf."""
    from assembly.why.gather import add_objects, read_cluster, read_conf, read_device_config
    from extender.engine.results import resource_units
    from extender.engine.run import run_session
    from lapilli.devices.names import VGPU_MEMORY

    view, source = await read_cluster(client), await read_conf(client, None)
    add_objects(view, "ConfigMap", await read_device_config(client, source.conf))
    decided = run_session(view.snapshot, source.conf, time.time())
    memory = {name: resource_units(decided.dims, q.allocated).get(VGPU_MEMORY, 0) / 1000 / 1024
              for name, q in decided.queues.items()}
    return {name: float(q.share) for name, q in decided.queues.items()}, memory


@queue.command("list")
@connection_options
def list_(master: str, kubeconfig: Path | None) -> None:
    """List all queues."""

    async def work(client: KubeClient) -> str:
        queues = (await client.list(QUEUES)).items
        if not queues:
            return "No resources found\n"
        shares, memory = await _shares(client)
        return format_queues(queues, await _stats(client), shares, gpu_memory=memory)

    click.echo(run_with_client(kubeconfig, master, work), nl=False)


@queue.command("get")
@connection_options
@click.option("-n", "--name", default="", help="the name of queue")
def get(master: str, kubeconfig: Path | None, name: str) -> None:
    """Get one queue."""
    if not name:
        raise click.UsageError("name is mandatory to get the particular queue details")

    async def work(client: KubeClient) -> str:
        shares, memory = await _shares(client)
        return format_queues([await client.get(QUEUES, name)], await _stats(client), shares, gpu_memory=memory)

    click.echo(run_with_client(kubeconfig, master, work), nl=False)


@queue.command("operate")
@connection_options
@click.option("-n", "--name", default="", help="the name of queue")
@click.option("-w", "--weight", default=0, help="the weight of the queue")
@click.option("-a", "--action", default="", help="operate action to queue, valid actions are open, close, update")
def operate(master: str, kubeconfig: Path | None, name: str, weight: int, action: str) -> None:
    """Open, close or re-weight a queue."""
    if not name:
        raise click.UsageError("Queue name must be specified")
    if action == "update":
        if weight == 0:
            raise click.UsageError(
                f"When update queue {name}, weight must be specified, the value must be greater than 0")
        patch = {"spec": {"weight": weight}}

        async def update(client: KubeClient) -> None:
            await client.patch(QUEUES, name, patch)

        run_with_client(kubeconfig, master, update)
        return
    if not action:
        raise click.UsageError("Action can not be null")
    if action not in _ACTIONS:
        raise click.UsageError(f"Action {action} invalid, valid actions are open, close and update")

    async def command(client: KubeClient) -> None:
        target = await client.get(QUEUES, name)
        target.setdefault("apiVersion", QUEUES.api_version)
        target.setdefault("kind", QUEUES.kind)
        body = make_command(target, _ACTIONS[action].value, QUEUE_COMMAND_NAMESPACE)
        await client.create(COMMANDS, body, QUEUE_COMMAND_NAMESPACE)

    run_with_client(kubeconfig, master, command)
