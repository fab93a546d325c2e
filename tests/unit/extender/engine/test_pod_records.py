"""A snapshot's pod record carries what every session derives from it (status, replica index, request items), and a
copy made with `dataclasses.replace` (the service's plans and explain's empty cluster move pods that way) derives
them again from its own fields."""

from __future__ import annotations

import dataclasses

from extender.engine.model import TaskStatus
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import pod


def test_a_replaced_record_derives_its_status_index_and_request_again() -> None:
    snap = build_snapshot([pod({"name": "ns/job-w-3", "req": {"cpu": "1", "memory": "1Gi"}})])
    record = snap.pods["ns/job-w-3"]
    assert (record.status, record.index) == (TaskStatus.PENDING, 3)
    assert record.request_key == tuple(record.request.items())

    placed = dataclasses.replace(record, node_name="n1", name="job-w-7", request={"cpu": 2000.0})
    assert (placed.status, placed.index, placed.request_key) == (TaskStatus.BOUND, 7, (("cpu", 2000.0),))
    leaving = dataclasses.replace(record, phase="Running", node_name="n1", deleting=True)
    assert leaving.status is TaskStatus.RELEASING
    assert dataclasses.replace(record, name="driver").index is None
