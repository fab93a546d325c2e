"""`lapilli simulate WORKLOAD.yaml [--scheduler lapilli|default|both] [-o json|table]`: replay a workload.

A workload is multi-document YAML of Nodes, Queues, PriorityClasses and Volcano Jobs annotated with
`sim.lapilli.io/submit-at` and `sim.lapilli.io/duration`. `--jobs N` keeps the first N jobs (by submission time,
then document order) and may be repeated to run several cases; `--compare` is `--scheduler both`.
Bad input ends with exit code 2 and one line naming the document, the field and the problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson

from assembly.cli.inputs import fail, load_conf, load_documents
from assembly.sim import (
    DefaultScheduler,
    LapilliScheduler,
    Scheduler,
    SimResult,
    Workload,
    WorkloadError,
    load_workload,
    sim_conf,
)
from assembly.sim import simulate as run_simulation
from assembly.sim.groups import group_stats, render_groups
from assembly.sim.report import render, render_summary
from extender.engine.conf import SchedulerConf
from lapilli.times import parse_seconds


def _schedulers(which: str, conf: SchedulerConf) -> list[Scheduler]:
    lapilli: Scheduler = LapilliScheduler(conf)
    default: Scheduler = DefaultScheduler()
    choices: dict[str, list[Scheduler]] = {"lapilli": [lapilli], "default": [default], "both": [lapilli, default]}
    return choices[which]


def _run(work: Workload, schedulers: list[Scheduler], until: float | None) -> list[SimResult]:
    return [run_simulation(work, s, until) for s in schedulers]


def _json(results: list[SimResult]) -> dict[str, Any]:
    if len(results) == 1:
        return results[0].to_json()
    return {r.scheduler: r.to_json() for r in results}


@click.command()
@click.argument("workload_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--scheduler",
    type=click.Choice(["lapilli", "default", "both"]),
    default="lapilli",
    show_default=True,
    help="lapilli: the engine (gang, queues); default: kube-scheduler per pod; both: side by side.",
)
@click.option("--compare", is_flag=True, help="Same as --scheduler both.")
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
@click.option("--conf", "conf_file", type=click.Path(path_type=Path, dir_okay=False), help="Volcano scheduler conf.")
@click.option("--jobs", "job_counts", type=click.IntRange(min=1), multiple=True, help="Keep the first N jobs.")
@click.option("--until", "until_text", help="Stop at this simulated time (seconds or a duration like 2h).")
@click.option("--groups", is_flag=True,
              help="Also report each queue group (a top-level queue and the queues under it, e.g. a lab): its "
                   "jobs' waiting times and its GPU utilization.")
def simulate_command(
    workload_file: Path,
    scheduler: str,
    compare: bool,
    output: str,
    conf_file: Path | None,
    job_counts: tuple[int, ...],
    until_text: str | None,
    groups: bool,
) -> None:
    """Replay WORKLOAD_FILE (Nodes, Queues, Volcano Jobs) over simulated time and report per-job times."""
    try:
        until = parse_seconds(until_text) if until_text is not None else None
    except ValueError as exc:
        fail(f"--until: {exc}")
    conf = load_conf(conf_file, sim_conf)
    try:
        work = load_workload(load_documents(workload_file))
    except WorkloadError as exc:
        fail(f"{workload_file}: {exc}")
    schedulers = _schedulers("both" if compare else scheduler, conf)
    cases = [(f"{n} job{'s' if n > 1 else ''}", work.first_jobs(n)) for n in job_counts] or [("", work)]
    runs = [(label, _run(case, schedulers, until)) for label, case in cases]
    if output == "json":
        payload = _json(runs[0][1]) if len(runs) == 1 else {label: _json(res) for label, res in runs}
        if groups and len(runs) == 1:
            payload["groups"] = {r.scheduler: {g.group: g.to_json() for g in group_stats(r, work.queues)}
                                 for r in runs[0][1]}
        click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
        return
    blocks = [(f"== {workload_file} · {label}\n" if label else "") + render(res) for label, res in runs]
    if groups:
        blocks += [render_groups(r, work.queues) for _, results in runs for r in results]
    if len(runs) > 1:
        blocks.append("== summary\n" + render_summary(runs))
    click.echo("\n\n".join(blocks))


simulate = simulate_command  # the name `assembly.cli` registers
