"""Text tables of simulation results: per-job rows for one or more schedulers side by side, and a summary.

Times are seconds from the start of the simulation; `-` stands for what never happened.
"""

from __future__ import annotations

from collections.abc import Sequence

from assembly.sim.loop import JobOutcome, SimResult

_SEP = " | "


def _time(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"


def _gpus(value: float) -> str:
    return f"{value:g}"


def _state(job: JobOutcome) -> str:
    if job.state == "Deadlocked":
        return f"Deadlocked ({job.placed}/{job.pods} pods, {_gpus(job.gpus_held)} GPU held)"
    return job.state


def _utilization(result: SimResult) -> str:
    value = result.gpu_utilization
    return "-" if value is None else f"{value * 100:.1f}%"


def _unfinished(result: SimResult) -> str:
    return ", ".join(result.unfinished) or "-"


def _column(result: SimResult, keys: Sequence[str]) -> list[str]:
    """One scheduler's cells: header, one row per job, then the totals."""
    cells = [f"{'START':>7} {'FINISH':>7}  STATE"]
    for key in keys:
        job = result.jobs[key]
        cells.append(f"{_time(job.started):>7} {_time(job.finished):>7}  {_state(job)}")
    cells += [
        f"{_time(result.makespan_s):>7}",
        f"{_time(result.job_time_s):>7}",
        f"{_utilization(result):>7}",
        f"{_gpus(round(result.gpu_idle_held_s, 1)):>7}",
        f" {_unfinished(result)}",
    ]
    return cells


def render(results: Sequence[SimResult]) -> str:
    """Per-job rows with one column group per scheduler, side by side (one group for a single result)."""
    keys = sorted(results[0].jobs)
    labels = ["JOB", *keys, "makespan (s)", "job time (s)", "GPU utilization", "GPU idle-held (GPU·s)", "unfinished"]
    submitted = ["SUBMIT", *(_time(results[0].jobs[k].submitted) for k in keys), "", "", "", "", ""]
    columns = [_column(r, keys) for r in results]
    label_w = max(len(x) for x in labels)
    widths = [max(len(cell) for cell in col) for col in columns]
    title = f"{'':<{label_w}} {'':>7}"
    title += "".join(f"{_SEP}{r.scheduler:^{w}}" for r, w in zip(results, widths, strict=True))
    lines = [title.rstrip()]
    for row, (label, sub) in enumerate(zip(labels, submitted, strict=True)):
        line = f"{label:<{label_w}} {sub:>7}"
        line += "".join(f"{_SEP}{col[row]:<{w}}" for col, w in zip(columns, widths, strict=True))
        lines.append(line.rstrip())
        if row in (0, len(keys)):
            lines.append("-" * len(title))
    lines += [_deadlock_note(r) for r in results if r.deadlocked]
    return "\n".join(lines)


def _deadlock_note(result: SimResult) -> str:
    stuck = [j for j in result.jobs.values() if j.state == "Deadlocked"]
    held = sum(j.gpus_held for j in stuck)
    return (
        f"{result.scheduler}: deadlocked at {_time(result.makespan_s)} s: {len(stuck)} job(s) hold "
        f"{_gpus(held)} GPU for ever, waiting for pods that can never be placed"
    )


def render_summary(cases: Sequence[tuple[str, Sequence[SimResult]]]) -> str:
    """One row per case and scheduler: makespan, GPU utilization, GPU idle-held and unfinished jobs."""
    header = ("CASE", "SCHEDULER", "MAKESPAN_S", "GPU_UTIL", "GPU_IDLE_HELD_S", "FINISHED", "UNFINISHED")
    rows = [header]
    for case, results in cases:
        for r in results:
            done = sum(1 for j in r.jobs.values() if j.state == "Completed")
            rows.append(
                (
                    case,
                    r.scheduler,
                    _time(r.makespan_s),
                    _utilization(r),
                    _gpus(round(r.gpu_idle_held_s, 1)),
                    f"{done}/{len(r.jobs)}",
                    _unfinished(r),
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
