"""lapilli.meta: metadata of raw objects read defensively (missing or wrongly typed parts read as empty)."""

import orjson
import yaml

from lapilli.meta import (
    annotations_of,
    as_json,
    describe,
    is_deleting,
    key_of,
    labels_of,
    name_of,
    namespace_of,
    owner_references,
    resource_version,
    revision,
    slim_pod,
    uid_of,
)

POD = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
                                   "labels": {"a": "1"}, "annotations": {"b": "2"},
                                   "ownerReferences": [{"kind": "Job", "uid": "j"}, "junk"]}}


def test_well_formed_object():
    assert (name_of(POD), namespace_of(POD), uid_of(POD), key_of(POD)) == ("p", "ns", "u1", "ns/p")
    assert (resource_version(POD), revision(POD)) == ("42", 42)
    assert labels_of(POD) == {"a": "1"} and annotations_of(POD) == {"b": "2"}
    assert owner_references(POD) == [{"kind": "Job", "uid": "j"}]
    assert not is_deleting(POD) and is_deleting({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}})
    assert describe(POD) == "Pod ns/p" and describe({"kind": "Node", "metadata": {"name": "n"}}) == "Node n"


def test_malformed_objects_read_as_empty():
    for bad in (None, {}, {"metadata": None}, {"metadata": "x"}, {"metadata": {"labels": [1], "annotations": 3,
                                                                               "ownerReferences": {"a": 1}}}):
        assert (name_of(bad), key_of(bad), uid_of(bad), revision(bad)) == ("", "", "", -1)
        assert labels_of(bad) == {} and annotations_of(bad) == {} and owner_references(bad) == []
    assert describe(None) == "? ?"
    assert key_of({"metadata": {"name": "node-1"}}) == "node-1"  # cluster-scoped
    assert revision({"metadata": {"resourceVersion": "abc"}}) == -1


def test_as_json_writes_what_an_encoder_wrote_for_decoded_yaml():
    """Values a YAML document decodes to (timestamps, dates) come out as the text orjson writes for them, so a
    carried-over PodGroup condition reads the same in `-o json`; JSON's own values pass unchanged."""
    doc = yaml.safe_load("""
    at: 2024-01-02T03:04:05.5Z
    naive: 2024-01-02 03:04:05
    offset: 2024-01-02T03:04:05+02:00
    day: 2024-01-02
    plain: [1, 2.5, true, null, "x", {k: [y]}]
    """)
    assert orjson.dumps(as_json(doc)) == orjson.dumps(doc)
    assert as_json(doc["plain"]) == doc["plain"]


def test_as_json_turns_what_no_encoder_takes_into_text():
    doc = yaml.safe_load("b: !!binary aGk=\ns: !!set {a: null}")
    out = as_json(doc)
    assert out == {"b": "b'hi'", "s": "{'a'}"}
    orjson.dumps(out)  # encodable
    assert as_json((1, "a")) == [1, "a"] and as_json({1: 2}) == {"1": 2}


def test_as_json_does_not_follow_hostile_nesting():
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    out = as_json({"a": deep})
    depth, node = 0, out
    while isinstance(node, dict | list):
        node = node["a"] if isinstance(node, dict) else node[0]
        depth += 1
    assert node is None and depth == 64


def test_slim_pod_drops_volumes_mounts_the_kubelets_conditions_and_managed_fields_only():
    pod = {"metadata": {"name": "p", "managedFields": [{"manager": "kubectl"}], "annotations": {"a": "1"}},
           "spec": {"volumes": [{"name": "token", "projected": {}}], "nodeName": "n0", "tolerations": [{"key": "t"}],
                    "initContainers": [{"name": "i", "volumeMounts": [{"name": "token"}]}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}},
                                    "volumeMounts": [{"name": "token"}]}, "junk"]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready"}, {"type": "PodScheduled", "status": "True"}],
                      "containerStatuses": [{"name": "c", "restartCount": 2}]}}
    assert slim_pod(pod) is pod
    assert pod == {"metadata": {"name": "p", "annotations": {"a": "1"}},
                   "spec": {"nodeName": "n0", "tolerations": [{"key": "t"}], "initContainers": [{"name": "i"}],
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}, "junk"]},
                   "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}],
                              "containerStatuses": [{"name": "c", "restartCount": 2}]}}
    assert slim_pod({"status": {"conditions": [{"type": "Ready"}]}}) == {"status": {}}
    assert slim_pod({"spec": "junk", "status": None}) == {"spec": "junk", "status": None}
