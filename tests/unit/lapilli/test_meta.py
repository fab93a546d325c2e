"""lapilli.meta: metadata of raw objects read defensively (missing or wrongly typed parts read as empty)."""

from lapilli.meta import (
    annotations_of,
    describe,
    is_deleting,
    key_of,
    labels_of,
    name_of,
    namespace_of,
    owner_references,
    resource_version,
    revision,
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
