"""`lapilli schedule`: JSON shape, and bad input ending with exit code 2 and one line naming the problem."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from assembly.cli import main
from tests.unit.extender.engine.builders import documents

SCENARIO = {
    "nodes": [{"name": "n1", "alloc": {"cpu": "4", "memory": "8Gi"}}],
    "queues": [{"name": "default"}],
    "podgroups": [{"name": "ns/pg", "min": 2, "phase": "Pending"}],
    "pods": [
        {"name": "ns/pg-w-0", "group": "pg", "req": {"cpu": "1"}},
        {"name": "ns/pg-w-1", "group": "pg", "req": {"cpu": "1"}},
    ],
}


def _write(tmp_path: Path, docs: list, name: str = "snap.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_json_output_has_the_designed_shape(tmp_path):
    result = _run("schedule", str(_write(tmp_path, documents(SCENARIO))), "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert set(out) == {"binds", "evictions", "pipelined", "podgroups", "queues"}
    assert out["binds"] == {"ns/pg-w-0": "n1", "ns/pg-w-1": "n1"}
    # Binding counts as allocated (Volcano's AllocatedStatus); deserved is capped by what the queue requests.
    assert out["queues"]["default"]["allocated"] == {"cpu": "2", "pods": "2"}
    assert out["queues"]["default"]["deserved"] == {"cpu": "2", "pods": "2"}
    assert out["podgroups"]["ns/pg"]["phase"] == "Inqueue"


def test_table_output(tmp_path):
    result = _run("schedule", str(_write(tmp_path, documents(SCENARIO))))
    assert result.exit_code == 0
    assert "ns/pg-w-0" in result.output and "BINDS" in result.output


def _error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def test_unknown_kind(tmp_path):
    docs = [*documents(SCENARIO), {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}]
    line = _error_line(_run("schedule", str(_write(tmp_path, docs))))
    assert "Deployment" in line and "document 5" in line and "kind" in line


def test_malformed_quantity(tmp_path):
    docs = documents(SCENARIO)
    docs[0]["status"]["allocatable"]["cpu"] = "four"
    line = _error_line(_run("schedule", str(_write(tmp_path, docs))))
    assert "Node n1" in line and "status.allocatable.cpu" in line and "'four'" in line


def test_pod_naming_a_missing_podgroup(tmp_path):
    docs = [d for d in documents(SCENARIO) if d["kind"] != "PodGroup"]
    line = _error_line(_run("schedule", str(_write(tmp_path, docs))))
    assert "ns/pg-w-0" in line and "group-name" in line and "ns/pg" in line


def test_conf_naming_an_unknown_plugin_or_action_warns_once_and_runs_the_rest(tmp_path):
    # Volcano's scheduler logs "Failed to get plugin" / "Failed to find Action" and goes on (e.g. numa-aware).
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: enqueue, nosuchaction, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: nosuch\n")
    result = CliRunner().invoke(main, ["schedule", str(_write(tmp_path, documents(SCENARIO))), "--conf", str(conf),
                                       "-o", "json"])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, warnings
    assert "unknown action 'nosuchaction'" in warnings[0]
    assert "tiers[0].plugins[1]" in warnings[1] and "nosuch" in warnings[1]
    assert json.loads(result.stdout)["binds"] == {"ns/pg-w-0": "n1", "ns/pg-w-1": "n1"}


def test_conf_with_an_unreadable_argument_is_refused_naming_plugin_argument_and_value(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n"
                    "      binpack.weight: abc\n")
    line = _error_line(_run("schedule", str(_write(tmp_path, documents(SCENARIO))), "--conf", str(conf)))
    assert line == f'error: scheduler conf {conf}: plugin binpack: argument binpack.weight: "abc" is not a number'


def test_empty_conf_file_is_refused(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text("\n")
    line = _error_line(_run("schedule", str(_write(tmp_path, documents(SCENARIO))), "--conf", str(conf)))
    assert "empty" in line


def test_conf_rejects_hierarchical_drf_next_to_proportion(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text("actions: allocate\ntiers:\n- plugins:\n  - {name: drf, enableHierarchy: true}\n  - name: proportion\n")
    line = _error_line(_run("schedule", str(_write(tmp_path, documents(SCENARIO))), "--conf", str(conf)))
    assert "same tier" in line


def test_missing_file_and_bad_yaml(tmp_path):
    assert "snap.yaml" in _error_line(_run("schedule", str(tmp_path / "snap.yaml")))
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    assert "not valid YAML" in _error_line(_run("schedule", str(bad)))


def test_quota_keys_in_min_resources_are_read_as_the_scheduler_reads_them():
    from extender.engine.snapshot import scheduler_resources

    quota = {"requests.cpu": "4", "cpu": "4", "limits.cpu": "8", "count/pods": "4", "pods": "4",
             "requests.nvidia.com/gpu": "4"}
    assert scheduler_resources(quota) == {"cpu": "4", "pods": "4", "nvidia.com/gpu": "4"}
