"""The reflector's relist diff, back-off and event flow, driven by a scripted client (no server).

The real thing runs against kube-apiserver in tests/e2e/test_control_plane.py.
"""

from __future__ import annotations

import asyncio
import gc
import random
from typing import Any

import aiohttp
import pytest

from lapilli.cluster import Event, RateLimiter, Reflector, diff, watch_timeout
from lapilli.cluster import reflector as reflector_module
from lapilli.kube import Gone
from lapilli.kube.client import ObjectList
from lapilli.kube.errors import ApiError, NotFound
from lapilli.kube.resources import HYPERNODES, NODES, PODS
from lapilli.kube.watch import WatchEvent
from lapilli.meta import key_of as object_key
from lapilli.meta import only_metadata


def obj(name: str, rv: int, uid: str | None = None, ns: str | None = "ns", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv), "uid": uid or f"uid-{name}"}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta, **extra}


def kinds(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.type, object_key(e.obj)) for e in events]


def test_object_key_namespaced_and_cluster_scoped():
    assert object_key(obj("a", 1)) == "ns/a"
    assert object_key(obj("n1", 1, ns=None)) == "n1"


def test_diff_first_list_adds_everything_in_order():
    store, events = diff({}, [obj("a", 1), obj("b", 2)])
    assert kinds(events) == [("ADDED", "ns/a"), ("ADDED", "ns/b")]
    assert all(e.synthetic and e.old is None for e in events)
    assert list(store) == ["ns/a", "ns/b"]


def test_diff_emits_update_delete_and_nothing_for_unchanged():
    old = {"ns/a": obj("a", 1), "ns/b": obj("b", 2), "ns/c": obj("c", 3)}
    store, events = diff(old, [obj("a", 1), obj("b", 7), obj("d", 8)])
    assert kinds(events) == [("DELETED", "ns/c"), ("MODIFIED", "ns/b"), ("ADDED", "ns/d")]
    modified = events[1]
    assert modified.old is old["ns/b"] and modified.obj["metadata"]["resourceVersion"] == "7"
    assert events[0].obj is old["ns/c"]  # the last known state of what vanished
    assert set(store) == {"ns/a", "ns/b", "ns/d"}


def test_diff_recreated_under_same_name_is_delete_then_add():
    old = {"ns/a": obj("a", 1, uid="u1")}
    _, events = diff(old, [obj("a", 5, uid="u2")])
    assert kinds(events) == [("DELETED", "ns/a"), ("ADDED", "ns/a")]
    assert events[0].obj["metadata"]["uid"] == "u1" and events[1].obj["metadata"]["uid"] == "u2"


def test_backoff_doubles_with_jitter_caps_and_resets():
    b: RateLimiter[str] = RateLimiter(0.5, 30.0, jitter=0.5, rng=random.Random(7))
    delays = [b.when("watch") for _ in range(10)]
    for attempt, delay in enumerate(delays):
        base = min(30.0, 0.5 * 2**attempt)
        assert base <= delay <= min(30.0, base * 1.5)
    assert delays[-1] == 30.0
    b.forget("watch")
    assert 0.5 <= b.when("watch") <= 0.75


def test_watch_timeout_is_spread_between_min_and_twice_min():
    rng = random.Random(1)
    values = {watch_timeout(300, rng) for _ in range(200)}
    assert min(values) >= 300 and max(values) < 600 and len(values) > 50


class ScriptedClient:
    """Answers `list` and `watch` from scripts; a watch whose script ran out blocks like an idle stream."""

    def __init__(self, lists: list[ObjectList | Exception], watches: list[list[WatchEvent | Exception]]) -> None:
        self.lists, self.watches = lists, watches
        self.watch_calls: list[dict[str, Any]] = []
        self.idle = asyncio.Event()

    async def list(self, res, namespace=None, **kw) -> ObjectList:
        item = self.lists.pop(0)
        if isinstance(item, Exception):
            raise item
        transform = kw.get("transform")  # as KubeClient.list applies it, item by item
        return item if transform is None else ObjectList([transform(o) for o in item.items], item.resource_version)

    async def watch(self, res, namespace=None, **kw):
        self.watch_calls.append(kw)
        script = self.watches.pop(0) if self.watches else []
        if script and isinstance(script[0], OSError):
            raise script[0]  # refused before the server accepted the watch
        if kw.get("on_open"):
            kw["on_open"]()
        for item in script:
            if isinstance(item, Exception):
                raise item
            yield item
        if not self.watches:
            self.idle.set()
            await asyncio.Event().wait()


async def run_until_idle(reflector: Reflector, client: ScriptedClient) -> None:
    task = reflector.start()
    try:
        await asyncio.wait_for(client.idle.wait(), 5)
    finally:
        await reflector.stop()
    assert not task.cancelled() or task.done()


async def test_relist_on_gone_diffs_against_the_store():
    a1, b1 = obj("a", 1), obj("b", 2)
    client = ScriptedClient(
        lists=[ObjectList([a1, b1], "10"), ObjectList([obj("a", 12), obj("c", 13)], "14")],
        watches=[
            [WatchEvent("MODIFIED", obj("a", 11)), WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "11"}}),
             Gone(410, "Expired", "too old")],
            [WatchEvent("DELETED", obj("c", 15))],
        ],
    )
    seen: list[Event] = []
    reflector = Reflector(client, PODS, handlers=[seen.append], rng=random.Random(0))  # type: ignore[arg-type]
    await run_until_idle(reflector, client)

    assert kinds(seen) == [
        ("ADDED", "ns/a"), ("ADDED", "ns/b"),  # first list
        ("MODIFIED", "ns/a"),  # watch
        ("DELETED", "ns/b"), ("MODIFIED", "ns/a"), ("ADDED", "ns/c"),  # relist diff after 410
        ("DELETED", "ns/c"),  # watch again
    ]
    assert [e.synthetic for e in seen] == [True, True, False, True, True, True, False]
    assert seen[2].old is a1
    assert reflector.synced.is_set()
    assert (reflector.relists, reflector.restarts) == (2, 1)
    assert [c["resource_version"] for c in client.watch_calls] == ["10", "14"]
    assert reflector.resource_version == "15"
    assert all(c["allow_bookmarks"] for c in client.watch_calls)
    assert all(300 <= c["timeout_seconds"] < 600 for c in client.watch_calls)
    assert list(reflector.store) == ["ns/a"]


async def test_broken_connection_backs_off_and_resumes_from_last_version():
    client = ScriptedClient(
        lists=[aiohttp.ClientConnectionError("refused"), ObjectList([obj("n1", 3, ns=None)], "3")],
        watches=[[WatchEvent("ADDED", obj("n2", 4, ns=None)), aiohttp.ServerDisconnectedError()], []],
    )
    seen: list[Event] = []

    async def handler(event: Event) -> None:  # coroutine handlers are awaited in order
        await asyncio.sleep(0)
        seen.append(event)

    reflector = Reflector(client, NODES, handlers=[handler], backoff=RateLimiter(0.01, 0.02, jitter=0.5))  # type: ignore[arg-type]
    await run_until_idle(reflector, client)
    assert kinds(seen) == [("ADDED", "n1"), ("ADDED", "n2")]
    assert reflector.restarts == 2 and reflector.relists == 1  # a failed list, then a broken watch
    assert [c["resource_version"] for c in client.watch_calls] == ["3", "4"]


class RecordingBackoff(RateLimiter[str]):
    def __init__(self) -> None:
        super().__init__(0.001, 0.05)
        self.delays: list[float] = []

    def when(self, item: str) -> float:
        self.delays.append(super().when(item))
        return self.delays[-1]


async def test_backoff_resets_once_the_server_accepts_again_not_only_after_a_full_watch():
    """An API server outage builds the back-off up; once a list or watch is accepted again, the next drop is
    retried at the initial delay (it used to wait for a watch to run to its server timeout: up to 30 s)."""
    refused = ConnectionRefusedError("refused")
    client = ScriptedClient(
        lists=[refused, refused, refused, refused, ObjectList([], "1")],
        watches=[[aiohttp.ServerDisconnectedError()], [refused], [refused],
                 [aiohttp.ServerDisconnectedError()], []],
    )
    backoff = RecordingBackoff()
    reflector = Reflector(client, PODS, backoff=backoff)  # type: ignore[arg-type]
    await run_until_idle(reflector, client)
    assert backoff.delays == [0.001, 0.002, 0.004, 0.008,  # the outage: four refused lists
                              0.001,  # listed, watch accepted, then dropped: back to the start
                              0.002, 0.004,  # refused twice more
                              0.001]  # accepted again, dropped again


async def test_a_failing_handler_does_not_stop_the_others():
    client = ScriptedClient(lists=[ObjectList([obj("a", 1)], "1")], watches=[[WatchEvent("DELETED", obj("a", 2))]])
    seen: list[str] = []

    def broken(event: Event) -> None:
        raise RuntimeError("bug")

    reflector = Reflector(client, PODS, handlers=[broken, lambda e: seen.append(e.type)])  # type: ignore[arg-type]
    await run_until_idle(reflector, client)
    assert seen == ["ADDED", "DELETED"] and reflector.store == {}


@pytest.mark.parametrize("bad", [ValueError("x"), aiohttp.ClientPayloadError("cut")])
async def test_undecodable_or_cut_streams_are_retried(bad):
    client = ScriptedClient(lists=[ObjectList([], "1")], watches=[[bad], []])
    reflector = Reflector(client, PODS, backoff=RateLimiter(0.01, 30.0, jitter=0.5))  # type: ignore[arg-type]
    await run_until_idle(reflector, client)
    assert reflector.restarts == 1 and len(client.watch_calls) == 2


async def test_transform_slims_what_is_stored_and_handed_out():
    fat = obj("a", 1, spec={"big": list(range(100))})
    client = ScriptedClient(lists=[ObjectList([fat], "1")], watches=[[WatchEvent("MODIFIED", obj("a", 2, spec={}))]])
    seen: list[Event] = []

    def slim(o: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": o["metadata"]}

    reflector = Reflector(client, PODS, handlers=[seen.append], transform=slim)  # type: ignore[arg-type]
    await run_until_idle(reflector, client)
    assert reflector.store == {"ns/a": {"metadata": obj("a", 2)["metadata"]}}
    assert all("spec" not in e.obj for e in seen) and seen[1].old == {"metadata": fat["metadata"]}


async def test_stored_keeps_what_it_says_after_the_handlers_saw_the_whole_object_and_relists_still_diff():
    spec = {"containers": [{"name": "c"}]}
    client = ScriptedClient(
        lists=[ObjectList([obj("a", 1, spec=spec), obj("b", 2, spec=spec)], "2"),
               ObjectList([obj("a", 3, spec=spec), obj("b", 2, spec=spec)], "4")],
        watches=[[WatchEvent("ADDED", obj("c", 3, spec=spec)), Gone(410, "Expired", "too old")], []],
    )
    seen: list[Event] = []
    reflector = Reflector(client, PODS, handlers=[seen.append], stored=only_metadata)  # type: ignore[arg-type]
    await run_until_idle(reflector, client)
    assert all(e.obj.get("spec") == spec for e in seen if e.type != "DELETED")  # handlers read objects whole
    assert kinds(seen) == [("ADDED", "ns/a"), ("ADDED", "ns/b"), ("ADDED", "ns/c"),
                           ("DELETED", "ns/c"), ("MODIFIED", "ns/a")]  # b unchanged: nothing
    assert seen[3].obj == {"metadata": obj("c", 3)["metadata"]}  # a deletion found by a relist: what was kept
    assert reflector.store == {"ns/a": {"metadata": obj("a", 3)["metadata"]},
                               "ns/b": {"metadata": obj("b", 2)["metadata"]}}


async def test_a_relist_decodes_and_dispatches_with_the_cyclic_collector_paused():
    collecting: list[bool] = []

    class Listing(ScriptedClient):
        async def list(self, res, namespace=None, **kw) -> ObjectList:
            collecting.append(gc.isenabled())
            return await super().list(res, namespace, **kw)

    client = Listing(lists=[ObjectList([obj("a", 1)], "1")], watches=[[WatchEvent("ADDED", obj("b", 2))]])
    reflector = Reflector(client, PODS, handlers=[lambda _e: collecting.append(gc.isenabled())])  # type: ignore[arg-type]
    assert gc.isenabled()
    await run_until_idle(reflector, client)
    assert collecting == [False, False, True]  # the list and its dispatch paused; the watch's event not
    assert gc.isenabled()


async def test_an_optional_resource_that_is_not_served_counts_as_empty_until_it_is(monkeypatch, caplog):
    """HyperNodes on a cluster without their CRD (404) or without the RBAC rule (403): the reflector is synced and
    empty at once, says so once, drops what it held and checks again every ABSENT_RETRY_S."""
    monkeypatch.setattr(reflector_module, "ABSENT_RETRY_S", 0.001)
    client = ScriptedClient(
        lists=[ObjectList([obj("h1", 1, ns=None)], "1"), NotFound(404, "NotFound", "the server could not find it"),
               ApiError(403, "Forbidden", "no rule"), NotFound(404, "NotFound", "still"), ObjectList([obj("h2", 5, ns=None)], "5")],
        watches=[[Gone(410, "Expired", "crd deleted")], []],
    )
    seen: list[Event] = []
    reflector = Reflector(client, HYPERNODES, handlers=[seen.append], optional=True)  # type: ignore[arg-type]
    with caplog.at_level("INFO", logger="lapilli.cluster.reflector"):
        await run_until_idle(reflector, client)
    assert kinds(seen) == [("ADDED", "h1"), ("DELETED", "h1"), ("ADDED", "h2")]
    assert reflector.synced.is_set() and not reflector.absent and list(reflector.store) == ["h2"]
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["hypernodes: resourceVersion 1 expired, re-listing",
                        "hypernodes: not served (is its CRD installed?); treated as empty, checked again every 0s",
                        "hypernodes: now served"]


async def test_a_required_resource_that_is_not_served_is_not_synced():
    client = ScriptedClient(lists=[NotFound(404, "NotFound", "no"), ObjectList([], "1")], watches=[[]])
    reflector = Reflector(client, HYPERNODES, backoff=RateLimiter(0.001, 0.002))  # type: ignore[arg-type]
    task = reflector.start()
    await asyncio.sleep(0)
    assert not reflector.synced.is_set()
    await asyncio.wait_for(client.idle.wait(), 5)
    await reflector.stop()
    assert task.done() and reflector.restarts == 1
