"""Resource paths: one object's path needs its name; an empty one is refused, never turned into the collection's."""

from __future__ import annotations

import pytest

from lapilli.kube.resources import NODES, PODS, QUEUES


def test_object_collection_and_subresource_paths() -> None:
    assert PODS.path("ns", "p 1", "binding") == "/api/v1/namespaces/ns/pods/p%201/binding"
    assert PODS.path() == "/api/v1/pods"
    assert NODES.path("ignored", "n1") == "/api/v1/nodes/n1"
    assert QUEUES.path(None, "q") == "/apis/scheduling.volcano.sh/v1beta1/queues/q"


def test_an_empty_name_is_refused_rather_than_read_as_the_collection() -> None:
    with pytest.raises(ValueError, match="Pod with an empty name"):
        PODS.path("ns", "")
