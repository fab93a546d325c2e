"""Idempotent edits of a pod dict: each helper adds an item only if an equivalent one is not already there.

This is what makes `apply_plugins` safe to run twice (controller, then the pod mutator) and what leaves
alone a pod that already has the env, ports, volumes or mounts a plugin would add.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def pod_spec(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        spec = pod["spec"] = {}
    return spec


def _list_of_dicts(holder: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = holder.get(key)
    if not isinstance(items, list):
        items = holder[key] = []
    return items


def containers(pod: dict[str, Any], *, init: bool = True) -> Iterator[dict[str, Any]]:
    """Regular containers, then (with `init`) init containers — the order Volcano's plugins use."""
    spec = pod_spec(pod)
    keys = ("containers", "initContainers") if init else ("containers",)
    for key in keys:
        items = spec.get(key)
        for container in items if isinstance(items, list) else []:
            if isinstance(container, dict):
                yield container


def has_env(container: dict[str, Any], name: str) -> bool:
    env = container.get("env")
    return isinstance(env, list) and any(isinstance(e, dict) and e.get("name") == name for e in env)


def add_env(container: dict[str, Any], name: str, value: str) -> None:
    if not has_env(container, name):
        _list_of_dicts(container, "env").append({"name": name, "value": value})


def add_env_from_configmap(container: dict[str, Any], name: str, configmap: str, key: str) -> None:
    if not has_env(container, name):
        ref = {"configMapKeyRef": {"name": configmap, "key": key}}
        _list_of_dicts(container, "env").append({"name": name, "valueFrom": ref})


def add_port(container: dict[str, Any], name: str, port: int) -> None:
    """Volcano checks only the port number: a container already exposing it keeps its own port entry."""
    ports = container.get("ports")
    if isinstance(ports, list) and any(isinstance(p, dict) and p.get("containerPort") == port for p in ports):
        return
    _list_of_dicts(container, "ports").append({"name": name, "containerPort": port})


def add_volume(pod: dict[str, Any], volume: dict[str, Any]) -> None:
    volumes = _list_of_dicts(pod_spec(pod), "volumes")
    if not any(isinstance(v, dict) and v.get("name") == volume["name"] for v in volumes):
        volumes.append(volume)


def add_mount(container: dict[str, Any], mount: dict[str, Any]) -> None:
    """A mount at the same path (or of the same volume at the same path) counts as present."""
    mounts = container.get("volumeMounts")
    if isinstance(mounts, list) and any(
        isinstance(m, dict) and m.get("mountPath") == mount["mountPath"] for m in mounts
    ):
        return
    _list_of_dicts(container, "volumeMounts").append(mount)


def set_if_empty(mapping: dict[str, Any], key: str, value: str) -> None:
    if not mapping.get(key):
        mapping[key] = value
