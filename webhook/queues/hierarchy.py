"""Hierarchical queue rules — the parent/child half of Volcano's queue validation (HEAD `validate_queue.go`).

* On CREATE, or when `spec.parent` changes (to something other than empty/`root`): the parent is not the queue
  itself, the depth (the queue plus its non-root ancestors) is at most `--max-queue-depth`, the parent exists,
  and a parent without children yet has no allocated pods (they would be stranded in a non-leaf queue).
* The root queue's capability/deserved/guarantee are frozen when root protection is on.
* On CREATE, or an UPDATE changing parent/capability/deserved/guarantee (never for `root`): each capability is
  ≤ that of the nearest ancestor defining the resource; the siblings' summed guarantee and deserved fit the
  parent's; a queue with children has capability ≥ every descendant's and fits their summed guarantee/deserved.
Sums are checked on the resources the parent defines (Volcano's `LessPartly` also compares an undefined
cpu/memory as 0, which would forbid any guarantee under a parent that guarantees nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from lapilli.meta import name_of
from webhook.context import ROOT_QUEUE, AdmissionContext
from webhook.queues.resources import Resources, add, parsed, show, show_list
from webhook.queues.validate import allocated_pods
from webhook.queueview import children, not_found, parent_of, spec_of

Queue = Mapping[str, Any]


def _real_parent(queue: Queue) -> str:
    parent = parent_of(queue)
    return "" if parent in ("", ROOT_QUEUE) else parent


def parent_error(queue: Queue, ctx: AdmissionContext) -> str:
    """`validateHierarchicalQueue` (depth, existence, self-parenting, allocated pods of a new parent)."""
    name, parent = name_of(queue), _real_parent(queue)
    if not parent:
        return ""
    if parent == name:
        return f"queue {name} cannot use itself as parent"
    depth, ancestor = 1, parent
    while ancestor:
        depth += 1
        if depth > ctx.settings.max_queue_depth:
            return f"queue {name} exceeds the maximum allowed depth of {ctx.settings.max_queue_depth}"
        found = ctx.queues.get(ancestor)
        if found is None:
            return f"failed to get parent queue {ancestor} of queue {name}: {not_found(ancestor)}"
        ancestor = _real_parent(found)
    parent_queue = ctx.queues.get(parent)
    if parent_queue is None:
        return f"failed to get parent queue of queue {name}: {not_found(parent)}"
    if not children(ctx.queues, parent) and (pods := allocated_pods(parent_queue)) > 0:
        return f"queue {parent} cannot be the parent queue of queue {name} because it has allocated Pods: {pods}"
    return ""


def _resources_changed(new: Queue, old: Queue) -> bool:
    return any(parsed(spec_of(new), f) != parsed(spec_of(old), f) for f in ("capability", "deserved", "guarantee"))


def root_error(new: Queue, old: Queue | None, ctx: AdmissionContext) -> str:
    if old is None or name_of(new) != ROOT_QUEUE or not ctx.settings.root_queue_protection:
        return ""
    if _resources_changed(new, old):
        return "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
    return ""


def _nearest_ancestor_capability(queue: Queue, resource: str, ctx: AdmissionContext) -> Fraction | None:
    seen: set[str] = set()
    parent = _real_parent(queue)
    while parent and parent not in seen:
        seen.add(parent)
        found = ctx.queues.get(parent)
        if found is None:
            return None
        value = parsed(spec_of(found), "capability").get(resource, Fraction(0))
        if value > 0:
            return value
        parent = _real_parent(found)
    return None


def _subtree_max_capability(queue: Queue, resource: str, ctx: AdmissionContext, seen: set[str]) -> Fraction:
    value = parsed(spec_of(queue), "capability").get(resource, Fraction(0))
    if value > 0 or name_of(queue) in seen:
        return value
    seen.add(name_of(queue))
    return max(
        (_subtree_max_capability(c, resource, ctx, seen) for c in children(ctx.queues, name_of(queue))),
        default=Fraction(0),
    )


def _sum_error(label: str, owner: str, members: list[Queue], limit_queue: Queue) -> str:
    for field in ("guarantee", "deserved"):
        limit = parsed(spec_of(limit_queue), field)
        total: Resources = {}
        for member in members:
            add(total, parsed(spec_of(member), field))
            if any(total.get(r, Fraction(0)) > v for r, v in limit.items()):
                return (
                    f"{label} {owner} validation failed: sum of children's {field} ({show_list(total)}) "
                    f"exceeds parent's {field} limit ({show_list(limit)})"
                )
    return ""


def resources_error(queue: Queue, ctx: AdmissionContext) -> str:
    """`validateHierarchicalQueueResources`."""
    name, parent = name_of(queue), _real_parent(queue)
    if parent:
        parent_queue = ctx.queues.get(parent)
        if parent_queue is None:
            return f"parent queue {parent} not found: {not_found(parent)}"
        for resource, value in parsed(spec_of(queue), "capability").items():
            limit = _nearest_ancestor_capability(queue, resource, ctx)
            if limit is not None and value > limit:
                return (
                    f"queue {name} capability[{resource}]={show(resource, value)} exceeds its ancestor's "
                    f"capability={show(resource, limit)}"
                )
        siblings = [q for q in children(ctx.queues, parent) if name_of(q) != name]
        if error := _sum_error("parent queue", parent, [*siblings, queue], parent_queue):
            return error
    kids = children(ctx.queues, name)
    if not kids:
        return ""
    for resource, value in parsed(spec_of(queue), "capability").items():
        most = max(_subtree_max_capability(k, resource, ctx, set()) for k in kids)
        if value < most:
            return (
                f"queue {name} capability[{resource}]={show(resource, value)} is smaller than its descendants' "
                f"max capability={show(resource, most)}"
            )
    return _sum_error("queue", name, kids, queue)


def hierarchy_error(new: Queue, old: Queue | None, ctx: AdmissionContext) -> tuple[str, bool]:
    """(message, forbidden) for the hierarchical rules of a CREATE (`old` None) or UPDATE."""
    if (old is None or parent_of(old) != parent_of(new)) and (error := parent_error(new, ctx)):
        return error, False
    if error := root_error(new, old, ctx):
        return error, True
    if name_of(new) == ROOT_QUEUE:
        return "", False
    if old is None or parent_of(old) != parent_of(new) or _resources_changed(new, old):
        return resources_error(new, ctx), False
    return "", False
