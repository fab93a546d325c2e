"""Who closed a queue, for the explanation's "queue lab-a is Closed (closed by ...)": read from the Queue objects and
the Events about them, raw as the API server gives them. `lapilli job why`, the dashboard and the service's why pass
all ask this one function."""

from __future__ import annotations

from collections.abc import Iterable

from lapilli.api.constants import QUEUE_KIND
from lapilli.meta import Obj, meta, name_of


def closed_by(queues: Iterable[Obj], events: Iterable[Obj]) -> dict[str, str]:
    """queue -> who closed it and when, for queues not Open: the last CloseQueue event (the controller records it
    when it executes a `lapilli queue operate -a close` Command), else the field manager that wrote status.state."""
    out: dict[str, str] = {}
    closes: dict[str, Obj] = {}
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


def _stamp(event: Obj) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or
               meta(event).get("creationTimestamp") or "")
