"""`lapilli schedule SNAPSHOT.yaml [--conf CONF.yaml] [-o json|table]`: one scheduling session over a snapshot.

Bad input ends with exit code 2 and one line naming the document, the field and the problem.
"""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from assembly.cli.inputs import fail, load_conf, load_documents
from extender.engine.results import Decisions, resource_list
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import SnapshotError, build_snapshot


def render_table(result: Decisions) -> str:
    lines = ["BINDS"]
    lines += [f"  {pod:<40} -> {node}" for pod, node in sorted(result.binds.items())] or ["  (none)"]
    lines.append("EVICTIONS")
    lines += [f"  {pod}" for pod in sorted(result.evictions)] or ["  (none)"]
    lines.append("PIPELINED")
    lines += [f"  {pod:<40} -> {node}" for pod, node in sorted(result.pipelined.items())] or ["  (none)"]
    lines.append(f"{'PODGROUP':<40} {'PHASE':<10} CONDITION")
    for key, status in sorted(result.podgroups.items()):
        cond = status.conditions[-1] if status.conditions else None
        shown = f"{cond.type} {cond.message or ''}" if cond is not None else ""
        lines.append(f"{key:<40} {status.phase:<10} {shown}".rstrip())
    lines.append(f"{'QUEUE':<20} {'SHARE':>8}  DESERVED / ALLOCATED")
    for name, queue in sorted(result.queues.items()):
        # quantities as the JSON output spells them
        deserved = "-" if queue.deserved is None else _quantities(resource_list(result.dims, queue.deserved))
        allocated = _quantities(resource_list(result.dims, queue.allocated))
        lines.append(f"{name:<20} {queue.share:>8.3f}  {deserved} / {allocated}")
    return "\n".join(lines)


def _quantities(resources: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in resources.items()) or "-"


@click.command()
@click.argument("snapshot_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--conf", "conf_file", type=click.Path(path_type=Path, dir_okay=False), help="Volcano scheduler conf.")
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
def schedule(snapshot_file: Path, conf_file: Path | None, output: str) -> None:
    """Run one scheduling session over SNAPSHOT_FILE (Nodes, Pods, PodGroups, Queues, PriorityClasses)."""
    conf = load_conf(conf_file, parse_scheduler_conf)
    try:
        snap = build_snapshot(load_documents(snapshot_file))
    except SnapshotError as exc:
        fail(f"{snapshot_file}: {exc}")
    result = run_session(snap, conf)
    if output == "json":
        click.echo(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(render_table(result))
