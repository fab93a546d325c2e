"""One list+watch per resource for every owner in a process (client-go's SharedInformerFactory).

`lapilli serve` runs the extender's cluster state, the controllers' warm caches and the admission caches in one
process, and each used to list and watch what it reads on its own: at 50,000 pods, two lists of every pod (decoded
and stored twice, ~0.6 GB each without managedFields) and twice the watch traffic, before the service was ready. An
owner asks `Shared.reflector` for a resource with its handler; the first ask makes the reflector, later asks add
their handler to it (before it lists: the assembly builds every owner before any starts, so each handler sees every
object from the first list on). Owners start and stop it through `start` and `stop`: it starts once, and stops when
the last owner that started it stops it. An owner built without a `Shared` makes its own. Only whole, unfiltered
resources are shared; every owner of one must agree on its `transform`, its `stored` and whether it is optional.
"""

from __future__ import annotations

from collections.abc import Callable

from lapilli.cluster.reflector import EventHandler, Reflector
from lapilli.kube.client import KubeClient
from lapilli.kube.resources import Resource
from lapilli.meta import MutableObj

Transform = Callable[[MutableObj], MutableObj]


class Shared:
    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self._reflectors: dict[Resource, Reflector] = {}
        self._running: dict[Resource, int] = {}  # owners that started it and have not stopped it

    def reflector(self, res: Resource, handler: EventHandler | None, *, name: str, transform: Transform | None = None,
                  optional: bool = False, stored: Transform | None = None) -> Reflector:
        """The process's reflector of `res`, with `handler` among its handlers (`name` names it when made here;
        `transform`, `optional`, `stored`: see `Reflector`)."""
        found = self._reflectors.get(res)
        if found is None:
            found = self._reflectors[res] = Reflector(self.client, res, name=name, transform=transform,
                                                      optional=optional, stored=stored)
        elif (found.transform, found.optional, found.stored) != (transform, optional, stored):
            raise ValueError(f"{res.plural}: every owner of a shared reflector must agree on its transform, store and "
                             f"whether it is optional")
        if found.synced.is_set() or found.relists:
            raise RuntimeError(f"{res.plural}: a handler added after the first list would miss what it listed")
        if handler is not None:
            found.handlers.append(handler)
        return found

    def start(self, reflector: Reflector) -> None:
        """An owner starts it: the first start lists, later ones find it running."""
        self._running[reflector.resource] = self._running.get(reflector.resource, 0) + 1
        reflector.start()

    async def stop(self, reflector: Reflector) -> None:
        """An owner is done with it: it stops once every owner that started it has stopped it."""
        left = self._running[reflector.resource] = max(0, self._running.get(reflector.resource, 0) - 1)
        if left == 0:
            await reflector.stop()
