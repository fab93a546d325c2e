"""What `lapilli job why` and `lapilli dashboard` read from the cluster with the user's own kubeconfig: the
scheduler's inputs (Nodes, Pods, PodGroups, Queues, PriorityClasses — the objects the live scheduler watches), the
scheduler conf from where the cluster's scheduler reads it, and who closed a queue.

The snapshot is built by the engine's own `add_object`, object by object, as the service's watch cache does: an
object its parsers refuse is left out, as the live scheduler leaves it out.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from extender.engine.conf import ConfError, SchedulerConf
from extender.engine.run import parse_scheduler_conf
from extender.engine.snapshot import Snapshot, add_object
from lapilli.api.constants import QUEUE_KIND
from lapilli.kube import ApiError, KubeClient, NotFound
from lapilli.kube.resources import CONFIG_MAPS, EVENTS, NODES, PODGROUPS, PODS, PRIORITY_CLASSES, QUEUES, Resource
from lapilli.meta import key_of, meta, name_of

log = logging.getLogger("lapilli.why")

SCHEDULER_INPUTS: Final[tuple[Resource, ...]] = (NODES, PODS, PODGROUPS, QUEUES, PRIORITY_CLASSES)
# Where an installed Lapilli keeps its scheduler conf (Volcano's format), and the key inside the ConfigMap.
CONF_CONFIGMAP_NAMESPACE: Final = "lapilli-system"
CONF_CONFIGMAP_NAME: Final = "lapilli-scheduler-conf"
CONF_KEY: Final = "lapilli-scheduler.conf"
CONF_ENV: Final = "LAPILLI_SCHEDULER_CONF"
# The conf `lapilli dev up` hands to `lapilli serve --scheduler-conf` (a source checkout).
SHIPPED_CONF: Final = Path(__file__).resolve().parents[2] / "manifests" / "scheduler" / "lapilli-scheduler.conf"


@dataclass(slots=True)
class ClusterView:
    """The scheduler's inputs as raw objects (by kind, then `ns/name` or name) and as the engine's snapshot."""

    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    snapshot: Snapshot = field(default_factory=Snapshot)
    skipped: list[str] = field(default_factory=list)  # objects the parsers refused, with why


def build_view(objects: Mapping[str, Iterable[dict[str, Any]]]) -> ClusterView:
    view = ClusterView()
    for kind, items in objects.items():
        per = view.objects.setdefault(kind, {})
        for obj in items:
            per[key_of(obj)] = obj
            try:
                add_object(view.snapshot, obj)
            except (ValueError, KeyError, TypeError) as exc:
                view.skipped.append(f"{kind} {key_of(obj)}: {exc}")
    return view


async def read_cluster(client: KubeClient) -> ClusterView:
    """List the scheduler's inputs (cluster-wide; a kind the user may not list is left out with a warning)."""

    async def one(res: Resource) -> tuple[str, list[dict[str, Any]]]:
        try:
            return res.kind, (await client.list(res)).items
        except ApiError as exc:
            log.warning("cannot list %s: %s", res.plural, exc.message or exc)
            return res.kind, []

    return build_view(dict(await asyncio.gather(*(one(res) for res in SCHEDULER_INPUTS))))


@dataclass(frozen=True, slots=True)
class ConfSource:
    conf: SchedulerConf
    where: str


async def read_conf(client: KubeClient, path: Path | None) -> ConfSource:
    """The conf the cluster's scheduler runs: `--conf FILE`, else $LAPILLI_SCHEDULER_CONF, else the ConfigMap an
    installed Lapilli mounts, else the conf `lapilli dev up` passes (a source checkout), else Volcano's default."""
    if path is None and os.environ.get(CONF_ENV):
        path = Path(os.environ[CONF_ENV])
    if path is not None:
        return ConfSource(parse_scheduler_conf(path.read_text()), str(path))
    try:
        cm = await client.get(CONFIG_MAPS, CONF_CONFIGMAP_NAME, CONF_CONFIGMAP_NAMESPACE)
        data = cm.get("data") or {}
        text = data.get(CONF_KEY) or next((v for k, v in sorted(data.items()) if k.endswith(".conf")), None)
        if text:
            return ConfSource(parse_scheduler_conf(text),
                              f"ConfigMap {CONF_CONFIGMAP_NAMESPACE}/{CONF_CONFIGMAP_NAME}")
    except (NotFound, ApiError):
        pass
    if SHIPPED_CONF.is_file():
        return ConfSource(parse_scheduler_conf(SHIPPED_CONF.read_text()), str(SHIPPED_CONF))
    return ConfSource(parse_scheduler_conf(None), "Volcano's default conf")


def closed_by(queues: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """queue -> who closed it and when, for queues not Open: the last CloseQueue event (the controller records it
    when it executes a `lapilli queue operate -a close` Command), else the field manager that wrote status.state."""
    out: dict[str, str] = {}
    closes: dict[str, Mapping[str, Any]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != QUEUE_KIND or event.get("reason") != "CloseQueue":
            continue
        name = str(involved.get("name") or "")
        if _stamp(event) >= _stamp(closes.get(name) or {}):
            closes[name] = event
    for queue in queues:
        name = name_of(queue)
        if ((queue.get("status") or {}).get("state") or "Open") == "Open":
            continue
        close = closes.get(name)
        if close is not None:
            out[name] = f"by a CloseQueue Command at {_stamp(close)}"
            continue
        for entry in meta(queue).get("managedFields") or []:
            fields = str(entry.get("fieldsV1") or "")
            if "f:state" in fields:
                out[name] = f"by {entry.get('manager') or 'an unknown client'} at {entry.get('time') or '?'}"
    return out


def _stamp(event: Mapping[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or
               meta(event).get("creationTimestamp") or "")


async def read_queue_events(client: KubeClient) -> list[dict[str, Any]]:
    """Events about Queues (cluster-scoped objects have theirs in `default`); none if the user may not list."""
    try:
        return (await client.list(EVENTS, "default", field_selector=f"involvedObject.kind={QUEUE_KIND}")).items
    except ApiError:
        return []


__all__ = ["ClusterView", "ConfError", "ConfSource", "build_view", "closed_by", "read_cluster", "read_conf"]
