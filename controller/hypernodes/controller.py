"""The HyperNode controller: every HyperNode's `status.nodeCount`, and HyperNodes discovered from node labels.

Counterpart: Volcano's `hyperNode-controller` (`pkg/controllers/hypernode`: `syncHyperNodeStatus`,
`reconcileTopology`, the ConfigMap handler and the label discoverer's node and HyperNode handlers). The count is
recomputed when a HyperNode is added or changed, as in Volcano, and also when a node comes, goes or is relabelled
while some HyperNode selects nodes by regex or label (Volcano's count then waits for the next HyperNode event).
Discovery runs when the ConfigMap the settings name enables the `label` source, and again whenever a node carrying
one of its labels comes, goes or changes them, or a HyperNode is deleted or a discovered one changed by someone
else. All work goes through one rate-limited `WorkQueue` (keys `("status", name)` and `("discover", "")`), so a
refused write is retried with back-off, and nothing runs before the node and HyperNode caches have listed.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from controller.context import Context
from controller.hypernodes.config import CONFIG_KEY, LABEL_SOURCE, LabelDiscovery, read_config
from controller.hypernodes.labels import NamingFailed, discover, is_discovered
from controller.hypernodes.reconcile import Plan, differs, plan
from lapilli.api.constants import NETWORK_TOPOLOGY_SOURCE_LABEL
from lapilli.cluster import Event, RateLimiter, WorkQueue, run_worker
from lapilli.kube import REQUEST_ERRORS, ApiError, NotFound
from lapilli.kube.resources import HYPERNODES
from lapilli.meta import MutableObj, Obj, labels_of, name_of, pointer_token, resource_version, uid_of
from lapilli.topology import node_count, read_hypernode

log = logging.getLogger(__name__)

Key = tuple[str, str]
DISCOVER: Final[Key] = ("discover", "")
_SOURCE_PATH: Final = f"/metadata/labels/{pointer_token(NETWORK_TOPOLOGY_SOURCE_LABEL)}"


class NotSynced(RuntimeError):
    """The node or HyperNode cache has not listed yet: the work waits (with back-off) rather than act on half."""


class DiscoveryIncomplete(RuntimeError):
    """Some writes of a discovery pass failed; the pass is retried whole."""


def slim_node(node: MutableObj) -> MutableObj:
    """What the controller keeps of a Node: its name and labels (the reflector's transform)."""
    meta = node.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "uid", "resourceVersion", "labels") if k in meta}
    return {"metadata": kept}


def _selects_nodes(hypernode: Obj) -> bool:
    """Whether its count depends on which nodes exist: some member matches by regex or by label."""
    members = (hypernode.get("spec") or {}).get("members") or []
    return any(isinstance(m, Mapping) and any(k in (m.get("selector") or {}) for k in ("regexMatch", "labelMatch"))
               for m in members)


class HyperNodeController:
    def __init__(self, ctx: Context, *, synced: Callable[[], bool], rng: random.Random | None = None) -> None:
        """`synced`: whether the node and HyperNode caches have listed."""
        self.ctx = ctx
        self.synced = synced
        self.rng = rng or random.Random()
        self.queue: WorkQueue[Key] = WorkQueue(RateLimiter(0.5, 60.0))
        self.config: LabelDiscovery | None = None

    # -- watch events (the stores are updated by the caller first) ----------------------------------------

    def on_hypernode(self, event: Event) -> None:
        if event.type != "DELETED":
            self.queue.add(("status", name_of(event.obj)))
        if self.config is not None and (event.type == "DELETED" or (is_discovered(event.obj) and not event.synthetic
                                                                    and event.type == "MODIFIED")):
            self.queue.add(DISCOVER)

    def on_node(self, event: Event) -> None:
        """A node came, went or changed labels: the counts that select nodes, and discovery if one of its labels
        changed (a node that is not there has no labels)."""
        before = labels_of(event.old if event.type == "MODIFIED" else event.obj) if event.type != "ADDED" else {}
        after = labels_of(event.obj) if event.type != "DELETED" else {}
        if event.type == "MODIFIED" and before == after:
            return
        for hypernode in self.ctx.hypernodes.values():
            if _selects_nodes(hypernode):
                self.queue.add(("status", name_of(hypernode)))
        if self.config is not None:
            keys = self.config.keys()
            if {k: v for k, v in before.items() if k in keys} != {k: v for k, v in after.items() if k in keys}:
                self.queue.add(DISCOVER)

    def on_config(self, event: Event) -> None:
        """The ConfigMap the settings name: discovery follows its `label` source (off when it goes)."""
        config: LabelDiscovery | None = None
        problems: list[str] = []
        if event.type != "DELETED":
            config, problems = read_config((event.obj.get("data") or {}).get(CONFIG_KEY))
        for problem in problems:
            log.warning("hypernode discovery: ConfigMap %s: %s", name_of(event.obj), problem)
        if config != self.config:
            log.info("hypernode discovery from node labels %s", "on: " + ", ".join(
                f"{name} {list(reversed(keys))}" for name, keys in config.types) if config else "off")
        changed, self.config = config != self.config, config
        if config is not None and changed:
            self.queue.add(DISCOVER)

    # -- work ----------------------------------------------------------------------------------------------

    async def run_worker(self) -> None:
        await run_worker(self.queue, self._process, name="hypernode", retried=self.ctx.metrics.retried("hypernodes"),
                         expected=(*REQUEST_ERRORS, NotSynced, DiscoveryIncomplete, NamingFailed))

    async def _process(self, key: Key) -> None:
        if not self.synced():
            raise NotSynced("the node and HyperNode caches have not listed yet")
        if key == DISCOVER:
            await self._discover()
        else:
            await self._count(key[1])

    async def _count(self, name: str) -> None:
        """`syncHyperNodeStatus`: write `status.nodeCount` when it is not what the members select."""
        hypernode = self.ctx.hypernodes.get(name)
        record = read_hypernode(hypernode)[0] if hypernode is not None else None
        if hypernode is None or record is None:
            return
        count = node_count(record, [(name_of(n), labels_of(n)) for n in self.ctx.nodes.values()])
        if (hypernode.get("status") or {}).get("nodeCount", 0) == count:
            return
        try:
            self.ctx.hypernodes.wrote(await self.ctx.client.patch_status(HYPERNODES, name,
                                                                         {"status": {"nodeCount": count}}))
        except NotFound:
            return

    async def _discover(self) -> None:
        config = self.config
        if config is None:
            return
        desired = discover(config, self.ctx.nodes.values(), self.ctx.hypernodes.values(), self.rng)
        todo = plan(self.ctx.hypernodes.values(), desired)
        if not todo:
            return
        failures = await self._apply(todo)
        log.info("hypernode discovery: %d created, %d updated, %d deleted%s", len(todo.creates), len(todo.updates),
                 len(todo.deletes), f"; {len(failures)} failed" if failures else "")
        if failures:
            raise DiscoveryIncomplete("; ".join(failures))

    async def _apply(self, todo: Plan) -> list[str]:
        """Every write of the plan, in order; what failed, each in one line (the rest still goes through)."""
        failures: list[str] = []
        for obj in todo.deletes:
            await self._try(self._delete(obj), f"delete {name_of(obj)}", failures)
        for obj, kept in todo.shrinks:
            await self._try(self._patch(obj, {**obj["spec"], "members": kept}, {}), f"shrink {name_of(obj)}",
                            failures)
        for obj, want in todo.updates:
            current = self.ctx.hypernodes.get(name_of(obj)) or obj  # after its shrink, the shrunk one
            if differs(current, want):  # a shrink may have been all it needed
                await self._try(self._patch(current, want["spec"], want["metadata"]["labels"]),
                                f"update {name_of(obj)}", failures)
        for want in todo.creates:
            await self._try(self._create(want), f"create {name_of(want)}", failures)
        return failures

    @staticmethod
    async def _try(write: Any, what: str, failures: list[str]) -> None:
        try:
            await write
        except REQUEST_ERRORS as exc:
            message = exc.message if isinstance(exc, ApiError) else str(exc)
            failures.append(f"{what}: {message}")

    async def _delete(self, obj: Obj) -> None:
        # Preconditions: an object replaced or changed since it was read (perhaps no longer discovery's) stays.
        with contextlib.suppress(NotFound):
            await self.ctx.client.delete(HYPERNODES, name_of(obj), uid=uid_of(obj) or None,
                                         resource_version=resource_version(obj) or None)
        self.ctx.hypernodes.deleted(obj, linger=False)

    async def _patch(self, obj: Obj, spec: Mapping[str, Any], labels: Mapping[str, str]) -> None:
        """Replace the spec and set `labels`, only while the HyperNode still carries discovery's label (the `test`
        fails the whole patch otherwise): one someone took over meanwhile is not overwritten, and a status write
        in between (its node count) does not make the patch fail as a resourceVersion would."""
        ops: list[dict[str, Any]] = [{"op": "test", "path": _SOURCE_PATH, "value": LABEL_SOURCE},
                                     {"op": "replace", "path": "/spec", "value": dict(spec)}]
        ops += [{"op": "add", "path": f"/metadata/labels/{pointer_token(k)}", "value": v} for k, v in labels.items()]
        self.ctx.hypernodes.wrote(await self.ctx.client.patch(HYPERNODES, name_of(obj), ops, patch_type="json"))

    async def _create(self, obj: Mapping[str, Any]) -> None:
        self.ctx.hypernodes.wrote(await self.ctx.client.create(HYPERNODES, dict(obj)))
