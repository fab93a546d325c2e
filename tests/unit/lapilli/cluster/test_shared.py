"""Shared reflectors: one list and watch of a resource for every owner in a process."""

from __future__ import annotations

import pytest

from lapilli.cluster import Event, Shared
from lapilli.kube.client import ObjectList
from lapilli.kube.resources import PODS, QUEUES
from lapilli.kube.watch import WatchEvent
from lapilli.meta import without_managed_fields
from tests.unit.lapilli.cluster.test_reflector import ScriptedClient, kinds, obj


async def test_two_owners_share_one_list_and_watch_and_it_stops_with_the_last_of_them():
    client = ScriptedClient(lists=[ObjectList([obj("a", 1)], "1")], watches=[[WatchEvent("ADDED", obj("b", 2))]])
    shared = Shared(client)  # type: ignore[arg-type]
    first: list[Event] = []
    second: list[Event] = []
    mine = shared.reflector(PODS, first.append, name="pods")
    theirs = shared.reflector(PODS, second.append, name="ctl-pods")
    assert mine is theirs and mine.name == "pods"
    shared.start(mine)
    shared.start(theirs)
    await client.idle.wait()
    assert kinds(first) == kinds(second) == [("ADDED", "ns/a"), ("ADDED", "ns/b")]
    assert len(client.watch_calls) == 1  # one list (the script had one), one watch
    await shared.stop(mine)
    assert mine._task is not None and not mine._task.done()  # the other owner still reads it
    await shared.stop(theirs)
    assert mine._task is None


def test_owners_must_agree_on_what_is_stored_and_join_before_it_lists():
    shared = Shared(ScriptedClient([], []))  # type: ignore[arg-type]
    pods = shared.reflector(PODS, None, name="pods", transform=without_managed_fields)
    with pytest.raises(ValueError, match="agree"):
        shared.reflector(PODS, None, name="ctl-pods")
    assert shared.reflector(PODS, None, name="ctl-pods", transform=without_managed_fields) is pods
    queues = shared.reflector(QUEUES, None, name="queues")
    queues.synced.set()
    with pytest.raises(RuntimeError, match="miss"):
        shared.reflector(QUEUES, None, name="ctl-queues")
