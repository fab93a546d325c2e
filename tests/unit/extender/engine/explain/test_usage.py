"""Explain names the decayed usage when fairshare orders one queue before another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from extender.engine.explain import Kind, explain
from extender.engine.run import parse_scheduler_conf
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import documents

ROWS = yaml.safe_load((Path(__file__).resolve().parents[1] / "scenarios" / "fairshare.yaml").read_text())


def _row(start: str) -> dict[str, Any]:
    return next(r for r in ROWS if r["name"].startswith(start))


def _why(row: dict[str, Any], key: str) -> Any:
    conf = parse_scheduler_conf(yaml.safe_dump(row["conf"]))
    return explain(build_snapshot(documents(row)), conf, [key], now=row["now"])[key]


def test_the_queue_behind_is_told_both_usages() -> None:
    answer = _why(_row("with fairshare the order flips"), "a/ja")
    order = answer.reasons[0]
    assert order.kind is Kind.ORDER
    assert ("lab-a used 1,900 GPU·h (decayed, half-life 7d) against lab-b's 300 GPU·h: lab-b goes first"
            in order.message)
    assert order.data["usage"]["usedHours"] == {"lab-a": 1900.0, "lab-b": 300.0}


def test_in_a_tree_the_labs_are_named_where_the_paths_part() -> None:
    answer = _why(_row("in a queue tree"), "a/alice")
    assert "lab-a used 1,900 GPU·h (decayed, half-life 7d) against lab-b's 300 GPU·h: lab-b (lab-b-carol) goes first" \
        in answer.reasons[0].message


def test_without_fairshare_the_usage_is_never_named() -> None:
    answer = _why(_row("without fairshare"), "b/jb")
    assert all("GPU·h" not in r.message for r in answer.reasons)
    assert answer.reasons[0].kind is Kind.ORDER and "usage" not in answer.reasons[0].data
