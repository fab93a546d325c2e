"""The pictures of issue 19's scale benches, drawn from their recorded JSON (bench/results/).

    .venv/bin/python bench/scale_plots.py        (what `make scale-pictures` runs)

* bench/shapes.png — pods/s to all Running for each of Volcano's shapes under Lapilli (bench/shapes.py), beside plain
  kube-scheduler and the do-nothing extender on single pods in the same run, and the published numbers: Volcano's
  40-55 pods/s (its tuning guide: 10,000 Jobs x 1 pod took about 250 s, 180 s with its webhooks off, on an 8-core
  Kind cluster) and YuniKorn's 204 pods/s (2,000 Kubemark nodes, 50,000 pods, its performance page).
* bench/restart.png — gang pods bound over time after a restart (bench/restart.py --out) at each recorded size.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
VOLCANO = (40.0, 55.0)  # pods/s: 10,000 pods in ~250 s, ~180 s with the webhooks off
YUNIKORN = 204.0  # pods/s at 2,000 Kubemark nodes


def shapes_png(data: dict[str, Any], out: Path) -> None:
    cases = data["cases"]
    lapilli = [c for c in cases if c["case"] == "lapilli"]
    labels = [f"{c['jobs']:,} x {c['pods_per_job']:,}" for c in lapilli]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    bars = ax.bar(labels, [c["pods_per_s"] or 0 for c in lapilli], color="#c0392b", label="Lapilli (Volcano Jobs)")
    ax.bar_label(bars, fmt="%.0f")
    styles = {"kube-scheduler": ("#2c3e50", "-"), "do-nothing": ("#7f8c8d", "--")}
    names = {"kube-scheduler": "kube-scheduler, single pods", "do-nothing": "do-nothing extender, single pods"}
    for c in cases:
        if c["case"] in styles and c["pods_per_s"]:
            color, style = styles[c["case"]]
            label = f"{names[c['case']]}: {c['pods_per_s']:.0f}"
            ax.axhline(c["pods_per_s"], color=color, linestyle=style, label=label)
    ax.axhspan(*VOLCANO, color="#f39c12", alpha=0.3, label="Volcano, published: 40-55 (8-core Kind, 10,000 pods)")
    ax.axhline(YUNIKORN, color="#27ae60", linestyle=":", label="YuniKorn, published: 204 (2,000 Kubemark nodes)")
    total = lapilli[0]["pods"] if lapilli else 0
    ax.set_title(f"{total:,} one-GPU pods on {data['nodes']:,} simulated nodes, 2 cores: create to all Running")
    ax.set_xlabel("Volcano Jobs x pods per Job")
    ax.set_ylabel("pods/s")
    ax.set_ylim(0, max([YUNIKORN, *(c["pods_per_s"] or 0 for c in cases)]) * 1.15)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def restart_png(runs: list[dict[str, Any]], out: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in sorted(runs, key=lambda r: r["nodes"]):
        points = run["timeline"]
        label = (f"{run['nodes']:,} nodes, {run['running_pods'] + run['gang_pods']:,} pods: first bind "
                 f"{run['first_bind_s']} s, all {run['gang_pods']:,} bound {run['all_bound_s']} s")
        ax.plot([p[0] for p in points], [p[1] for p in points], label=label)
        if run.get("synced_s"):
            ax.axvline(run["synced_s"], color=ax.lines[-1].get_color(), linestyle=":", alpha=0.6)
    ax.set_title("Gang pods bound after `lapilli serve` restarts (dotted: the service ready)")
    ax.set_xlabel("seconds after the restart")
    ax.set_ylabel("gang pods bound")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS
    drawn = []
    if (shapes := results / "shapes.json").exists():
        shapes_png(json.loads(shapes.read_text()), HERE / "shapes.png")
        drawn.append("bench/shapes.png")
    restarts = [json.loads(p.read_text()) for p in sorted(results.glob("restart-*.json"))]
    if restarts:
        restart_png(restarts, HERE / "restart.png")
        drawn.append("bench/restart.png")
    print("drew " + (", ".join(drawn) if drawn else f"nothing: no recorded results in {results}"))


if __name__ == "__main__":
    main()
