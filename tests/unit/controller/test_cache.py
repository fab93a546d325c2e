import random

from controller.cache import Store
from controller.context import job_index
from tests.unit.controller.builders import pod


def job(uid: str, rv: str) -> dict:
    return {"metadata": {"name": "j", "namespace": "ml", "uid": uid, "resourceVersion": rv}}


def test_our_write_answered_after_the_watch_saw_the_object_deleted_does_not_bring_it_back():
    store = Store()
    store.observe("ADDED", job("u1", "10"))
    store.observe("DELETED", job("u1", "12"))
    store.wrote(job("u1", "11"))  # a status update that was in flight when the Job was deleted
    assert store.get("ml/j") is None


def test_a_namesake_created_after_the_deletion_is_seen():
    store = Store()
    store.observe("ADDED", job("u1", "10"))
    store.observe("DELETED", job("u1", "12"))
    store.observe("ADDED", job("u2", "13"))
    assert store.get("ml/j") == job("u2", "13")


def _grouped(name: str, group: str, uid: str, rv: int) -> dict:
    return {"metadata": {"name": name, "namespace": "ml", "uid": uid, "resourceVersion": str(rv)},
            "spec": {"queue": group}}


def test_an_index_count_is_what_the_index_lists_through_every_kind_of_write():
    """`count` reads the index's size: every key it holds must be in view whatever the writes, stale events,
    tombstones and namesakes do."""
    rng = random.Random(7)
    store = Store({"queue": lambda obj: obj["spec"]["queue"]})
    for step in range(3000):
        name, group, uid = f"pg{rng.randrange(12)}", rng.choice("ab"), f"u{rng.randrange(20)}"
        obj = _grouped(name, group, uid, rv=step if rng.random() < 0.8 else max(step - 50, 0))
        kind = rng.randrange(5)
        if kind == 0:
            store.wrote(obj)
        elif kind == 1:
            store.deleted(obj, linger=rng.random() < 0.5)
        else:
            store.observe(("ADDED", "MODIFIED", "DELETED")[kind - 2], obj)
        for queue in "ab":
            listed = store.by_index("queue", queue)
            assert store.count("queue", queue) == len(listed), step
            assert all(o["spec"]["queue"] == queue for o in listed), step
    assert sum(store.count("queue", q) for q in "ab") == len(store)


def test_store_newest_wins_and_deletions_we_made():
    store = Store({"job": job_index})
    fresh = pod("job1", "w", 0)
    fresh["metadata"]["resourceVersion"] = "7"
    stale = pod("job1", "w", 0, "Pending")
    stale["metadata"]["resourceVersion"] = "6"
    store.wrote(fresh)
    store.observe("MODIFIED", stale)  # a late watch event must not roll our own write back
    assert store.get("ns1/job1-w-0") is fresh and store.by_index("job", "ns1/job1") == [fresh]
    store.deleted(fresh, linger=True)
    assert store.deleting(store.get("ns1/job1-w-0"))
    store.observe("DELETED", fresh)
    assert store.get("ns1/job1-w-0") is None and store.by_index("job", "ns1/job1") == []
    store.wrote(fresh)
    store.deleted(fresh, linger=False)
    assert store.get("ns1/job1-w-0") is None
    store.observe("MODIFIED", fresh)  # a late event of the object we dropped stays dropped
    assert store.get("ns1/job1-w-0") is None
    again = pod("job1", "w", 0, uid="new-uid")
    again["metadata"]["resourceVersion"] = "9"
    store.observe("ADDED", again)
    store.observe("DELETED", fresh)  # the old incarnation's deletion does not remove its namesake
    assert store.get("ns1/job1-w-0") is again and not store.deleting(again)
