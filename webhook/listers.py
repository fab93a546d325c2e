"""Read-only views of cluster objects the rules consult, as `Protocol`s the assembly fills.

In the service they are backed by list+watch reflectors (`lapilli.cluster`); in tests by plain dicts
(`MemoryQueues`, `MemoryJobs`, `MemoryNamespaces`, `MemoryHyperNodes`). Objects are the API server's JSON as
dicts. Counterpart: Volcano's `QueueLister` in `router.AdmissionServiceConfig`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from lapilli.meta import Obj, name_of, namespace_of


class QueueLister(Protocol):
    """Queues (cluster-scoped) by name."""

    def get(self, name: str) -> Obj | None: ...

    def list(self) -> Iterable[Obj]: ...


class JobLister(Protocol):
    """Volcano Jobs by namespace and name."""

    def get(self, namespace: str, name: str) -> Obj | None: ...


class NamespaceLister(Protocol):
    """Namespaces by name (the PodGroup mutator reads their `scheduling.volcano.sh/queue-name` annotation)."""

    def get(self, name: str) -> Obj | None: ...


class HyperNodeLister(Protocol):
    """HyperNodes (cluster-scoped); `synced` once the first list is in (before it, `list` may be short)."""

    def list(self) -> Iterable[Obj]: ...

    def synced(self) -> bool: ...


class MemoryQueues:
    """A `QueueLister` over a fixed set of Queue dicts."""

    def __init__(self, queues: Iterable[Obj] = ()) -> None:
        self._by_name = {name_of(q): q for q in queues}

    def get(self, name: str) -> Obj | None:
        return self._by_name.get(name)

    def list(self) -> Iterable[Obj]:
        return list(self._by_name.values())


class MemoryJobs:
    """A `JobLister` over a fixed set of Job dicts."""

    def __init__(self, jobs: Iterable[Obj] = ()) -> None:
        self._by_key = {(namespace_of(j), name_of(j)): j for j in jobs}

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._by_key.get((namespace, name))


class MemoryNamespaces:
    """A `NamespaceLister` over a fixed set of Namespace dicts."""

    def __init__(self, namespaces: Iterable[Obj] = ()) -> None:
        self._by_name = {name_of(n): n for n in namespaces}

    def get(self, name: str) -> Obj | None:
        return self._by_name.get(name)


class MemoryHyperNodes:
    """A `HyperNodeLister` over a fixed set of HyperNode dicts, always synced."""

    def __init__(self, hypernodes: Iterable[Obj] = ()) -> None:
        self._items = list(hypernodes)

    def list(self) -> Iterable[Obj]:
        return list(self._items)

    def synced(self) -> bool:
        return True
