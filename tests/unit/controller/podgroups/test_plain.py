"""The PodGroup of a plain pod (reference §3.8): which pods want one, its name, gang size and minResources."""

from controller.podgroups.plain import build_podgroup, min_member, network_topology
from lapilli.plainpods import group_of, podgroup_name_for, wants_podgroup
from tests.unit.controller.builders import container


def bare_pod(**meta):
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid", **meta},
            "spec": {"schedulerName": "volcano", "containers": [container(cpu="1", memory="1Gi")],
                     "priorityClassName": "high"}}


def test_plain_pods_that_want_a_podgroup():
    assert wants_podgroup(bare_pod(), ["volcano"])
    assert not wants_podgroup(bare_pod(), ["other"])
    assert not wants_podgroup(bare_pod(annotations={"scheduling.k8s.io/group-name": "x"}), ["volcano"])
    assert not wants_podgroup(bare_pod(deletionTimestamp="2026-01-01T00:00:00Z"), ["volcano"])


def test_the_group_of_a_plain_pod_before_its_annotation():
    """What the extender counts a plain pod in until its Binding (or the controller) writes the annotation."""
    assert group_of(bare_pod(), ["volcano"]) == "podgroup-pod-uid"
    assert group_of(bare_pod(annotations={"scheduling.k8s.io/group-name": "x"}), ["volcano"]) == "x"
    assert group_of(bare_pod(), ["other"]) == ""
    assert group_of(bare_pod(deletionTimestamp="2026-01-01T00:00:00Z"), ["volcano"]) == "podgroup-pod-uid"
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    assert group_of(bare_pod(ownerReferences=[rs]), ["volcano"]) == "podgroup-rs-uid"


def test_plain_podgroup_of_a_bare_pod_and_of_an_owned_pod():
    pg = build_podgroup(bare_pod(annotations={"scheduling.volcano.sh/queue-name": "q1",
                                              "volcano.sh/preemptable": "true"}), {}, inherit=True)
    assert pg["metadata"]["name"] == "podgroup-pod-uid"
    assert pg["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid",
                                                  "controller": True}]
    assert pg["metadata"]["annotations"] == {"volcano.sh/preemptable": "true"}
    assert pg["spec"] == {"minMember": 1, "minResources": {"cpu": "1", "memory": "1Gi", "pods": "1"},
                          "priorityClassName": "high", "queue": "q1"}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    owned = bare_pod(ownerReferences=[rs])
    assert podgroup_name_for(owned) == "podgroup-rs-uid"
    pg = build_podgroup(owned, {"scheduling.volcano.sh/group-min-member": "3", "volcano.sh/x": "1", "other": "2"},
                        inherit=True)
    assert pg["metadata"]["ownerReferences"] == [rs] and pg["metadata"]["annotations"] == {"volcano.sh/x": "1"}
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["minResources"]["cpu"] == "3"
    assert "annotations" not in build_podgroup(owned, {"volcano.sh/x": "1"}, inherit=False)["metadata"]


def test_min_member_of_an_owner():
    assert [min_member(a) for a in ({}, {"scheduling.volcano.sh/group-min-member": "4"},
                                    {"scheduling.volcano.sh/group-min-member": "-2"},
                                    {"scheduling.volcano.sh/group-min-member": "x"})] == [1, 4, 1, 1]


MODE, TIER = "volcano.sh/network-topology-mode", "volcano.sh/network-topology-highest-tier"


def test_network_topology_from_the_pods_annotations():
    """`parseNetworkTopologyFromPod`: either key makes a networkTopology, hard unless it says soft (any case)."""
    def topology(notes):
        return build_podgroup(bare_pod(annotations=notes), {}, inherit=True)["spec"].get("networkTopology")

    assert topology({}) is None
    assert topology({MODE: "soft", TIER: "2"}) == {"mode": "soft", "highestTierAllowed": 2}
    assert topology({MODE: "SOFT"}) == {"mode": "soft"}
    assert topology({TIER: "+1"}) == {"mode": "hard", "highestTierAllowed": 1}
    assert topology({TIER: "0"}) == {"mode": "hard", "highestTierAllowed": 0}


def test_network_topology_annotations_that_do_not_parse_are_reported_and_left_out():
    pod = bare_pod(annotations={MODE: "strict", TIER: "two"})
    assert network_topology(pod) == ({"mode": "hard"}, [
        "volcano.sh/network-topology-mode 'strict' is neither hard nor soft: hard is used",
        "volcano.sh/network-topology-highest-tier 'two' is not a tier (an integer >= 0): no tier limit is set"])
    for bad in ("-1", " 1", "1.0", ""):
        spec, problems = network_topology(bare_pod(annotations={TIER: bad}))
        assert spec == {"mode": "hard"} and len(problems) == 1, bad
