"""What a kubelet would do next with a bound pod, as pure functions over the pod's JSON.

A bound pod starts Running at once (IPs, start time, ready containers). Annotation
`sim.lapilli.io/duration` (seconds, or a Go duration such as `90s` or `1h30m`) ends it that long after
it started; `sim.lapilli.io/exit-code` sets the exit code of its containers: 0 gives Succeeded, anything
else Failed (an exit code without a duration fails the pod right after it starts). Without either
annotation a pod runs until deleted. restartPolicy is not simulated: the annotations decide the outcome.
A pod with a deletionTimestamp is deleted for good (grace period 0), as the kubelet does once its
containers have stopped; that is also how evictions end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from assembly.dev.gpumetrics import UTIL_ANNOTATION
from lapilli.devices.facts import POD_KEYS
from lapilli.meta import Obj, annotations_of, is_deleting, section, uid_of
from lapilli.times import parse_rfc3339, parse_seconds, rfc3339

DURATION_ANNOTATION: Final = "sim.lapilli.io/duration"
EXIT_CODE_ANNOTATION: Final = "sim.lapilli.io/exit-code"



# The simulated GPU exporter (gpumetrics) reads the utilisation annotation (and each container's GPU asks, kept
# with the other extended resources).
_READ_ANNOTATIONS: Final = (DURATION_ANNOTATION, EXIT_CODE_ANNOTATION, UTIL_ANNOTATION)


def slim_pod(pod: Obj) -> dict[str, Any]:
    """Only what the kubelet reads (a Reflector transform): keeps a 10,000-pod store small for the GC."""
    meta, spec, status = section(pod, "metadata"), section(pod, "spec"), section(pod, "status")
    notes = meta.get("annotations") or {}
    slim_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp") if k in meta}
    slim_meta["annotations"] = {k: v for k, v in notes.items() if k in _READ_ANNOTATIONS or k in POD_KEYS}
    containers = {
        key: [{"name": c["name"], "image": c.get("image", ""), **_extended(c)} for c in spec.get(key) or []]
        for key in ("containers", "initContainers")
    }
    return {
        "metadata": slim_meta,
        "spec": {"nodeName": spec.get("nodeName"), **containers},
        "status": {k: status[k] for k in ("phase", "podIP", "startTime") if k in status},
    }


def _extended(container: Mapping[str, Any]) -> dict[str, Any]:
    """A container's extended resources (vGPU asks among them), for the device check; nothing when it has none."""
    resources = container.get("resources") or {}
    kept = {k: {n: q for n, q in (resources.get(k) or {}).items() if "/" in n} for k in ("limits", "requests")}
    return {"resources": kept} if any(kept.values()) else {}


def rejected_patch(pod: Obj, *, reason: str, message: str) -> dict[str, Any]:
    """The pods/status patch of a pod the kubelet refuses at admission (a device plugin's refusal): Failed."""
    return {"metadata": {"uid": uid_of(pod)}, "status": {"phase": "Failed", "reason": reason, "message": message}}


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the annotations say a pod ends: after `duration` seconds with `exit_code` (None: runs forever)."""

    duration: float | None
    exit_code: int


def outcome(pod: Obj) -> Outcome:
    """Read the simulation annotations; raises ValueError on malformed values."""
    notes = annotations_of(pod)
    raw_duration, raw_code = notes.get(DURATION_ANNOTATION), notes.get(EXIT_CODE_ANNOTATION)
    code = int(raw_code) if raw_code not in (None, "") else 0
    if raw_duration not in (None, ""):
        return Outcome(parse_seconds(str(raw_duration)), code)
    return Outcome(0.0 if code else None, code)


@dataclass(frozen=True, slots=True)
class Action:
    """The next step for one pod: start it, finish it at `at` (epoch seconds), delete it, or nothing."""

    kind: Literal["start", "finish", "delete", "none"]
    at: float = 0.0


NOTHING: Final = Action("none")


def next_action(pod: Obj, started_at: float | None = None) -> Action:
    """What the kubelet does next. `started_at` is the precise local start time if known (status.startTime
    has whole seconds only)."""
    if is_deleting(pod):
        return Action("delete")
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if phase in ("Succeeded", "Failed"):
        return NOTHING
    if phase == "Pending":
        return Action("start")
    plan = outcome(pod)
    if plan.duration is None:
        return NOTHING
    if started_at is None:
        started_at = parse_rfc3339(status["startTime"]) if status.get("startTime") else 0.0
    return Action("finish", started_at + plan.duration)


def _containers(pod: Obj, key: str) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get(key) or [])


def _container_id(pod: Obj, name: str) -> str:
    return f"sim://{uid_of(pod)}/{name}"


def _status_of(pod: Obj, container: Mapping[str, Any], state: dict[str, Any], ready: bool) -> dict[str, Any]:
    image = container.get("image", "")
    return {
        "name": container["name"], "image": image, "imageID": f"sim://{image}",
        "containerID": _container_id(pod, container["name"]), "ready": ready, "started": ready,
        "restartCount": 0, "state": state,
    }


def _conditions(ready: bool, now: str, reason: str | None = None) -> list[dict[str, Any]]:
    def cond(kind: str, ok: bool, why: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": kind, "status": "True" if ok else "False", "lastTransitionTime": now}
        if why:
            out["reason"] = why
        return out

    return [
        cond("Initialized", True, "PodCompleted" if reason else None),
        cond("Ready", ready, reason), cond("ContainersReady", ready, reason), cond("PodScheduled", True),
    ]


def running_patch(pod: Obj, *, pod_ip: str, host_ip: str, now: float) -> dict[str, Any]:
    """The pods/status patch that moves a bound pod to Running. Carries the UID: a pod re-created under
    the same name while the patch was in flight is not touched (the server answers 409)."""
    stamp = rfc3339(now)
    init = [
        _status_of(pod, c, {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp,
                                           "finishedAt": stamp, "containerID": _container_id(pod, c["name"])}},
                   False)
        for c in _containers(pod, "initContainers")
    ]
    status: dict[str, Any] = {
        "phase": "Running", "hostIP": host_ip, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": stamp,
        "conditions": _conditions(True, stamp),
        "containerStatuses": [
            _status_of(pod, c, {"running": {"startedAt": stamp}}, True) for c in _containers(pod, "containers")
        ],
    }
    if init:
        status["initContainerStatuses"] = init
    return {"metadata": {"uid": uid_of(pod)}, "status": status}


def finished_patch(pod: Obj, *, exit_code: int, now: float) -> dict[str, Any]:
    """The pods/status patch that ends a running pod: Succeeded on exit code 0, else Failed."""
    stamp = rfc3339(now)
    status = pod.get("status") or {}
    started = status.get("startTime") or stamp
    reason = "Completed" if exit_code == 0 else "Error"
    terminated = {"exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": stamp}
    return {
        "metadata": {"uid": uid_of(pod)},
        "status": {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": _conditions(False, stamp, "PodCompleted"),
            "containerStatuses": [
                _status_of(pod, c, {"terminated": {**terminated, "containerID": _container_id(pod, c["name"])}},
                           False)
                for c in _containers(pod, "containers")
            ],
        },
    }
