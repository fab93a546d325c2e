"""vcctl's verbs in the lapilli CLI: tables, the job view, Commands, flag parsing."""

from datetime import UTC, datetime

import click
import pytest
from click.testing import CliRunner

from assembly.cli import main
from assembly.cli.job import format_events, format_job_view, format_jobs, launch_job
from assembly.cli.queue import format_queues, podgroup_stats
from assembly.cli.vcctl import human_duration, make_command, resource_list

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)


def test_queue_table_counts_podgroups_per_phase():
    queues = [{"metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open"}},
              {"metadata": {"name": "q2"}, "spec": {"weight": 4}, "status": {"state": "Closing"}}]
    stats = podgroup_stats([{"spec": {"queue": "q2"}, "status": {"phase": "Running"}}, {"spec": {}},
                            {"spec": {"queue": "q2"}, "status": {"phase": "Inqueue"}}])
    queues[1]["metadata"]["annotations"] = {  # the leader's last sample, a half-life (7d) before `now`
        "lapilli.io/decayed-usage": '{"at":"2026-01-01T00:00:00Z","halfLife":"168h","usage":{"nvidia.com/gpu":13680000}}'}
    now = datetime(2026, 1, 8, tzinfo=UTC).timestamp()
    lines = format_queues(queues, stats, {"q2": 0.5}, now).splitlines()
    assert lines[0] == ("Name                     Weight  State   Inqueue Pending Running Unknown Completed Share  "
                        "Usage(decayed)")
    assert lines[1] == "default                  1       Open    0       1       0       0       0         -      -"
    assert lines[2] == "q2                       4       Closing 1       0       1       0       0         0.50   1,900 GPU·h"
    shared = format_queues(queues, stats, {"q2": 0.5}, now, gpu_memory={"q2": 60.0, "default": 0.0}).splitlines()
    assert shared[0].endswith("Share  Usage(decayed)  vGPU mem")  # shared GPUs: the memory the queue's cards hold
    assert shared[1].endswith("-      -               0 GB") and shared[2].endswith("1,900 GPU·h     60 GB")
    assert shared[0].index("vGPU mem") == shared[1].index("0 GB") == shared[2].index("60 GB")
    assert format_queues(queues, stats, {"q2": 0.5}, now, gpu_memory={"q2": 0.0}).splitlines() == lines


def _job(name, ns="default", **status):
    return {"metadata": {"name": name, "namespace": ns, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulerName": "volcano", "tasks": [{"replicas": 2}, {"replicas": 1}]},
            "status": {"state": {"phase": "Running"}, "minAvailable": 3, "running": 3, **status}}


def test_job_table_widths_filters_and_all_namespaces():
    jobs = [_job("a-long-job-name", retryCount=2), _job("b", ns="ml")]
    lines = format_jobs(jobs).splitlines()
    assert lines[0].startswith("Name              Creation       Phase       JobType     Replicas    Min   Pending")
    assert lines[1].split() == ["a-long-job-name", "2026-01-01", "Running", "Batch", "3", "3", "0", "3", "0", "0",
                                "0", "2"]
    assert len(format_jobs(jobs, selector="long").splitlines()) == 2
    assert len(format_jobs(jobs, scheduler="other").splitlines()) == 1
    wide = format_jobs(jobs, all_namespaces=True).splitlines()
    assert wide[0].startswith("Namespace   Name") and wide[2].startswith("ml          b ")


def test_job_view_and_events():
    job = {**_job("j"), "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}
    job["spec"]["plugins"] = {"ssh": [], "env": []}
    job["status"]["conditions"] = [{"status": "Running", "lastTransitionTime": "2026-01-01T00:00:01Z"}]
    events = [{"type": "Normal", "reason": "ExecuteAction", "count": 3, "message": "Start to execute action X ",
               "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:09:00Z",
               "source": {"component": "lapilli-controller"}}]
    text = format_job_view(job, events, NOW)
    assert "Name:       \tj\nNamespace:  \tdefault\nLabels:     \t<none>\n" in text
    assert "  Plugins:\n    Env:\t[]\n    Ssh:\t[]\n" in text
    assert "  Running:      \t3\n" in text and "    Phase:\tRunning\n" in text
    assert "    Running \t2026-01-01 00:00:01 +0000 UTC \n" in text
    assert text.endswith("\t" + "60s (x3 over 10m)".ljust(30) + "\t" + "lapilli-controller".ljust(40)
                         + "\tStart to execute action X\n")
    assert format_events([]) == "Events: \t<none>\n"


def test_commands_resources_and_durations():
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "uid": "u"}}
    cmd = make_command(job, "AbortJob", "ns")
    assert cmd["metadata"]["generateName"] == "j-abortjob-" and cmd["metadata"]["namespace"] == "ns"
    assert cmd["target"] == cmd["metadata"]["ownerReferences"][0] and cmd["target"]["uid"] == "u"
    assert cmd["action"] == "AbortJob" and cmd["kind"] == "Command"
    assert resource_list("cpu=1000m,memory=100Mi") == {"cpu": "1000m", "memory": "100Mi"}
    with pytest.raises(click.BadParameter):
        resource_list("cpu")
    assert [human_duration(s) for s in (5, 150, 900, 14520, 86400 * 3 + 3600)] == ["5s", "2m30s", "15m", "4h2m",
                                                                                  "3d1h"]
    built = launch_job("demo", "ns", "busybox", 2, 3, {"cpu": "1"}, {}, "volcano")
    assert built["spec"]["tasks"][0]["replicas"] == 3 and built["spec"]["minAvailable"] == 2
    assert built["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "1"}}


def test_verbs_are_registered_with_vcctl_flags():
    runner = CliRunner()
    assert "operate" in runner.invoke(main, ["queue", "--help"]).output
    for verb in ("run", "list", "view", "suspend", "resume", "delete"):
        assert verb in runner.invoke(main, ["job", "--help"]).output
    result = runner.invoke(main, ["queue", "operate", "-n", "q1", "-a", "bogus"])
    assert result.exit_code != 0 and "Action bogus invalid, valid actions are open, close and update" in result.output
    result = runner.invoke(main, ["job", "suspend", "-n", "ns"])
    assert result.exit_code != 0 and "job name is mandatory to suspend a particular job" in result.output
