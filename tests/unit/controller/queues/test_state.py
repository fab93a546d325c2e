"""The Queue's state machine (Open / Closing / Closed) and the status patch that writes it."""

from controller.queues.state import needs_root_parent, next_state, status_patch
from lapilli.api import Action


def test_queue_state_machine():
    assert next_state("", Action.SYNC_QUEUE, 0) == "Open"
    assert next_state("Open", Action.CLOSE_QUEUE, 2) == "Closing"
    assert next_state("Open", Action.CLOSE_QUEUE, 0) == "Closed"
    assert next_state("Closing", Action.SYNC_QUEUE, 1) == "Closing"
    assert next_state("Closing", Action.SYNC_QUEUE, 0) == "Closed"
    assert next_state("Closed", Action.CLOSE_QUEUE, 3) == "Closed"
    assert next_state("Closed", Action.OPEN_QUEUE, 3) == "Open"
    assert next_state("Closed", Action.SYNC_QUEUE, 0) == "Closed"


def test_queue_patch_holds_the_state_only():
    status = {"state": "Open", "allocated": {"cpu": "1"}}
    assert status_patch(status, "Open") is None
    assert status_patch(status, "Closing") == {"state": "Closing"}  # allocated is the scheduler's: not in the patch
    assert status_patch({}, "Open") == {"state": "Open"}
    assert needs_root_parent({"metadata": {"name": "q"}, "spec": {}})
    assert not needs_root_parent({"metadata": {"name": "root"}, "spec": {}})
    assert not needs_root_parent({"metadata": {"name": "q"}, "spec": {"parent": "eng"}})
