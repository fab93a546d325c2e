"""The plan that brings the discovered HyperNodes in step (`reconcileTopology`): only HyperNodes labelled by discovery
are changed or deleted, an unchanged one is not written, and members leave before others claim them."""

from controller.hypernodes.reconcile import plan

SOURCE = {"volcano.sh/network-topology-source": "label"}


def member(name, kind="Node"):
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def hn(name, tier, *members, labels=None, kind="Node", tier_name="leaf"):
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": dict(SOURCE if labels is None else labels)},
            "spec": {"tier": tier, "tierName": tier_name, "members": [member(m, kind) for m in members]}}


def desired(*objects):
    return {o["metadata"]["name"]: o for o in objects}


def test_nothing_to_do_when_in_step():
    current = [hn("a", 1, "n0", "n1")]
    assert not plan(current, desired(hn("a", 1, "n0", "n1")))


def test_hand_made_hypernodes_are_never_touched():
    by_hand = hn("mine", 1, "n0", labels={"team": "net"})
    todo = plan([by_hand], desired(hn("a", 1, "n1")))
    assert todo.deletes == () and todo.updates == () and [o["metadata"]["name"] for o in todo.creates] == ["a"]


def test_gone_changed_and_new():
    current = [hn("a", 1, "n0", "n1"), hn("b", 1, "n2"), hn("old", 1, "n9")]
    todo = plan(current, desired(hn("a", 1, "n0", "n1", "n3"), hn("b", 1, "n2", tier_name="rack"), hn("c", 1, "n4")))
    assert [o["metadata"]["name"] for o in todo.deletes] == ["old"]
    assert [(o["metadata"]["name"], w["spec"]["tierName"]) for o, w in todo.updates] == [("a", "leaf"), ("b", "rack")]
    assert todo.shrinks == ()  # nothing left a, nothing left b
    assert [o["metadata"]["name"] for o in todo.creates] == ["c"]


def test_a_missing_discovery_label_is_restored_and_other_labels_are_left():
    current = [hn("a", 1, "n0", labels={**SOURCE, "team": "net"})]
    want = hn("a", 1, "n0", labels={**SOURCE, "rack": "r1"})
    ((have, target),) = plan(current, desired(want)).updates
    assert target["metadata"]["labels"] == {**SOURCE, "rack": "r1"} and have["metadata"]["labels"]["team"] == "net"


def test_members_swapped_between_two_leaves_leave_first():
    """n1 moves a → b and n2 moves b → a: each loses a member before either gains one, or the webhook (a node in
    two HyperNodes of a tier) would refuse both updates forever."""
    current = [hn("a", 1, "n0", "n1"), hn("b", 1, "n2", "n3")]
    todo = plan(current, desired(hn("a", 1, "n0", "n2"), hn("b", 1, "n1", "n3")))
    assert [(o["metadata"]["name"], kept) for o, kept in todo.shrinks] == [("a", [member("n0")]), ("b", [member("n3")])]
    assert [o["metadata"]["name"] for o, _ in todo.updates] == ["a", "b"]


def test_a_leaf_moving_to_another_spine():
    current = [hn("s0", 2, "l0", "l1", kind="HyperNode"), hn("s1", 2, "l2", kind="HyperNode")]
    todo = plan(current, desired(hn("s0", 2, "l0", kind="HyperNode"), hn("s1", 2, "l1", "l2", kind="HyperNode")))
    assert [(o["metadata"]["name"], kept) for o, kept in todo.shrinks] == [("s0", [member("l0", "HyperNode")])]


def test_a_replacement_of_every_member_is_no_shrink_since_no_member_would_remain():
    todo = plan([hn("a", 1, "n0")], desired(hn("a", 1, "n1")))
    assert todo.shrinks == () and len(todo.updates) == 1
