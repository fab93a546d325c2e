"""task-topology annotations: Volcano's `plugins/task-topology/topology_test.go` Test_readTopologyFromPgAnnotations
cases, read from a PodGroup's annotations into groups of roles (or the error Volcano gives)."""

from __future__ import annotations

import pytest

from extender.engine.model import Job, Task, TaskStatus
from extender.engine.plugins.task_topology import Topology, TopologyError, read_topology
from lapilli.nodematch import EVERYWHERE
from lapilli.resources.vector import Dims

AFF, ANTI, ORDER = ("volcano.sh/task-topology-affinity", "volcano.sh/task-topology-anti-affinity",
                    "volcano.sh/task-topology-task-order")


def _job(roles: list[str], annotations: dict[str, str]) -> Job:
    dims = Dims(["cpu"])
    job = Job(uid="default/job1", namespace="default", name="job1", queue="default", min_member=0,
              min_task_member={}, min_resources=None, priority=0, creation=0.0, phase="Inqueue",
              preemptable=False, allocated=dims.zeros(), annotations=annotations)
    for i, role in enumerate(roles):
        job.add_task(Task(uid=f"t{i}", namespace="default", name=f"job1-{role}-{i}", job=job.uid, role=role,
                          resreq=dims.zeros(), priority=1, status=TaskStatus.PENDING, node=None, creation=0.0,
                          best_effort=True, preemptable=True, placement=EVERYWHERE))
    return job


TF = ["ps", "ps", "worker", "worker", "chief", "evaluator"]


@pytest.mark.parametrize(("roles", "annotations", "expected"), [
    pytest.param(TF, {AFF: "ps,worker;ps,chief", ANTI: "ps;worker,chief", ORDER: "ps,worker,chief,evaluator"},
                 Topology([["ps", "worker"], ["ps", "chief"]], [["ps"], ["worker", "chief"]],
                          ["ps", "worker", "chief", "evaluator"]), id="correct annotation"),
    pytest.param(["ps-some", "ps-some", "worker-another-some", "worker-another-some", "chief-kk", "evaluator-tt"],
                 {AFF: "ps-some,worker-another-some;ps-some,chief-kk", ANTI: "ps-some;worker-another-some,chief-kk",
                  ORDER: "ps-some,worker-another-some,chief-kk,evaluator-tt"},
                 Topology([["ps-some", "worker-another-some"], ["ps-some", "chief-kk"]],
                          [["ps-some"], ["worker-another-some", "chief-kk"]],
                          ["ps-some", "worker-another-some", "chief-kk", "evaluator-tt"]),
                 id="correct annotation with tasks whose names contain `-`"),
    pytest.param(TF, {AFF: "ps,worker;ps,,chief,;", ANTI: "ps;worker,chief;;;", ORDER: "ps,worker,chief,evaluator,,,"},
                 Topology([["ps", "worker"], ["ps", "", "chief", ""], [""]],
                          [["ps"], ["worker", "chief"], [""], [""], [""]],
                          ["ps", "worker", "chief", "evaluator", "", "", ""]), id="redundant punctuations"),
])
def test_volcano_read_topology(roles: list[str], annotations: dict[str, str], expected: Topology) -> None:
    assert read_topology(_job(roles, annotations)) == expected


@pytest.mark.parametrize(("roles", "annotations", "message"), [
    pytest.param(TF, {AFF: "$%GF$^trtqwrg^", ANTI: "ps;worker,chief;#@FGEW^vfa897bgs;;",
                      ORDER: "ps,worker,chief,evaluator,,,"},
                 "task $%GF$^trtqwrg^ do not exist in job <default/job1>", id="invalid annotation"),
    pytest.param(["ps", "ps", "worker", "worker"], {AFF: "ps,worker", ANTI: "ps", ORDER: "ps,worker,chief"},
                 "task chief do not exist in job <default/job1>", id="invalid task name"),
    pytest.param(["ps", "ps", "worker", "worker"], {AFF: "ps,worker", ANTI: "ps,ps", ORDER: "ps,worker"},
                 "task ps is duplicate in job <default/job1>", id="duplicate task name"),
])
def test_volcano_read_topology_errors(roles: list[str], annotations: dict[str, str], message: str) -> None:
    with pytest.raises(TopologyError) as exc:
        read_topology(_job(roles, annotations))
    assert str(exc.value) == message


def test_no_annotation_means_no_topology() -> None:
    assert read_topology(_job(TF, {})) is None
