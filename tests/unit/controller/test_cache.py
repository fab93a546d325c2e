from controller.cache import Store


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
