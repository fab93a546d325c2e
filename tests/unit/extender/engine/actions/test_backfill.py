"""backfill action: the order Volcano's `actions/backfill/backfill_test.go` TestPickUpPendingTasks expects, pipelined
BestEffort tasks included (they go back to Pending and are placed like the others)."""

from __future__ import annotations

from typing import Any

from extender.engine.actions.backfill import Backfill
from extender.engine.conf import parse_conf
from extender.engine.model import TaskStatus
from extender.engine.run import open_session, registry
from extender.engine.snapshot import build_snapshot
from extender.engine.statement import Statement
from tests.unit.extender.engine.builders import documents

# TestPickUpPendingTasks' tier: priority {Preemptable, TaskOrder, JobOrder}, drf {QueueOrder}; nothing else on.
CONF = {
    "actions": "backfill",
    "tiers": [
        {
            "plugins": [
                {"name": "priority", "enablePreemptable": True, "enableTaskOrder": True, "enableJobOrder": True,
                 "enableJobStarving": False},
                {"name": "drf", "enableQueueOrder": True, "enableJobOrder": False, "enablePreemptable": False,
                 "enableReclaimable": False},
            ]
        }
    ],
}


def _pods(job: str, numbers: tuple[int, ...]) -> list[dict[str, Any]]:
    pods = []
    for n in numbers:
        pods.append({"name": f"default/{job}-besteffort-task-{n}", "group": job, "priority": n})
        pods.append({"name": f"default/{job}-unbesteffort-task-{n}", "group": job, "priority": n,
                     "req": {"cpu": "500m"}})
    return pods


def test_volcano_pick_up_pending_tasks_orders_queue_job_task_and_takes_pipelined_back() -> None:
    scenario = {
        "nodes": [{"name": "node1", "alloc": {"cpu": "8", "memory": "8Gi"}}],
        "queues": [{"name": "q1"}],
        "priorityClasses": [{"name": "job-priority-1", "value": 1}, {"name": "job-priority-2", "value": 2}],
        "podgroups": [
            {"name": "default/pg1", "queue": "q1", "min": 1, "minTaskMember": {"": 3},
             "priorityClassName": "job-priority-1"},
            {"name": "default/pg2", "queue": "q1", "min": 1, "minTaskMember": {"": 3},
             "priorityClassName": "job-priority-2"},
        ],
        "pods": _pods("pg1", (1, 2, 3, 4)) + _pods("pg2", (1, 2, 3, 4)),
    }
    ssn = open_session(build_snapshot(documents(scenario)), parse_conf(CONF, registry()))
    node = ssn.node_by_name["node1"]
    pipelined = [t for t in ssn.tasks.values() if t.index in (2, 4)]  # tasks -2 and -4 of both jobs
    for task in pipelined:
        Statement(ssn).pipeline(task, node)

    order = [t.name for t in Backfill._pending(ssn)]

    assert order == [
        "pg2-besteffort-task-4", "pg2-besteffort-task-3", "pg2-besteffort-task-2", "pg2-besteffort-task-1",
        "pg1-besteffort-task-4", "pg1-besteffort-task-3", "pg1-besteffort-task-2", "pg1-besteffort-task-1",
    ]
    # The pipelined BestEffort tasks went back to Pending (and left the node); the others stay pipelined.
    for task in pipelined:
        expected = TaskStatus.PENDING if task.best_effort else TaskStatus.PIPELINED
        assert task.status is expected, task.name
    assert ssn.arrays.pipelined[node.idx].sum() > 0
