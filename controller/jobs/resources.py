"""The objects next to a Job's pods: plugin Services, ConfigMaps, Secrets, NetworkPolicies, and PVCs.

Mirrors the plugins' `OnJobAdd` / `OnJobUpdate` / `OnJobDelete` and `createJobIOIfNotExist` (reference §3.2,
§3.7). What the objects look like comes from `lapilli.jobplugins.job_resources`; this module only creates,
refreshes and deletes them. Each plugin records `plugin-<name>: <name>` in `status.controlledResources` when its
objects exist, and removes it when they are deleted (on every whole-Job kill), so a restarted Job gets fresh
ones (a new ssh key included) when it is initiated again. The ssh key pair is generated only when its Secret
is really created: RSA generation costs tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import secrets
import string
from collections.abc import Mapping
from typing import Any, Final

from lapilli.api import Job
from lapilli.jobplugins import KNOWN_PLUGINS, SSHKeyPair, generate_keypair, job_resources
from lapilli.jobplugins.naming import job_shape, owner_reference
from lapilli.kube import AlreadyExists, KubeClient, NotFound
from lapilli.kube.resources import CONFIG_MAPS, SECRETS, SERVICES, VC_JOBS, Resource
from lapilli.meta import name_of, namespace_of, owner_references, uid_of

NETWORK_POLICIES: Final = Resource("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy")
PVCS: Final = Resource("v1", "persistentvolumeclaims", "PersistentVolumeClaim")
_BY_KIND: Final = {"Service": SERVICES, "ConfigMap": CONFIG_MAPS, "Secret": SECRETS,
                   "NetworkPolicy": NETWORK_POLICIES}
# Which plugin owns which kind of object (for OnJobDelete).
_OWNER: Final = {"Secret": "ssh", "Service": "svc", "ConfigMap": "svc", "NetworkPolicy": "svc"}
_PLACEHOLDER: Final = SSHKeyPair(b"", b"")
_PVC_CHARS: Final = string.ascii_lowercase + string.digits


class PvcMissing(RuntimeError):
    """A volume names a PVC that does not exist: the Job stays Pending until someone creates it."""


def plugin_key(name: str) -> str:
    return f"plugin-{name}"


def plugin_objects(job_doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The objects the Job's plugins want (the Secret with a placeholder key pair)."""
    return job_resources(job_doc, ssh_keypair=_PLACEHOLDER)


def plugin_object_names(job_name: str) -> list[tuple[Resource, str, str]]:
    """(resource, name, owning plugin) of every object the plugins of Job `job_name` may have made."""
    return [
        (SERVICES, job_name, "svc"), (CONFIG_MAPS, f"{job_name}-svc", "svc"),
        (NETWORK_POLICIES, job_name, "svc"), (SECRETS, f"{job_name}-ssh", "ssh"),
    ]


class PluginResources:
    """Creates, refreshes and deletes plugin objects; remembers what it wrote to skip needless reads."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._configmaps: dict[tuple[str, str], dict[str, str]] = {}  # (ns, name) -> data last written/read
        self._pvcs: set[tuple[str, str]] = set()

    async def on_add(self, job: Job, job_doc: Mapping[str, Any], controlled: dict[str, str]) -> None:
        """Create the objects of every plugin not yet recorded in `controlled`, then record them all."""
        for obj in plugin_objects(job_doc):
            plugin = _OWNER[obj["kind"]]
            if controlled.get(plugin_key(plugin)) == plugin:
                continue
            if obj["kind"] == "Secret":
                obj = _with_keys(job_doc, name_of(obj))
            await self._create(obj)
        for name in job.spec.plugins:
            if name in KNOWN_PLUGINS:
                controlled[plugin_key(name)] = name

    async def on_update(self, job_doc: Mapping[str, Any], controlled: Mapping[str, str]) -> None:
        """svc's `OnJobUpdate`: the hosts ConfigMap follows the replica counts (scaling)."""
        if controlled.get(plugin_key("svc")) != "svc":
            return
        for obj in plugin_objects(job_doc):
            if obj["kind"] == "ConfigMap":
                await self._refresh_configmap(obj)

    async def on_delete(self, job: Job, controlled: dict[str, str]) -> None:
        """Delete the objects of the plugins recorded in `controlled` and forget them."""
        for res, name, plugin in plugin_object_names(job.name):
            if controlled.get(plugin_key(plugin)) == plugin:
                await self.delete_owned(res, name, job.namespace, job.metadata.uid or "")
        for key in [k for k in controlled if k.startswith("plugin-")]:
            del controlled[key]

    async def delete_owned(self, res: Resource, name: str, namespace: str, owner_uid: str) -> None:
        """Delete `name` if it is owned by the Job `owner_uid` (never a namesake someone else made)."""
        self._configmaps.pop((namespace, name), None)
        self._pvcs.discard((namespace, name))
        try:
            current = await self._client.get(res, name, namespace)
        except NotFound:
            return
        if owner_uid and not any(o.get("uid") == owner_uid for o in owner_references(current)):
            return
        with contextlib.suppress(NotFound):
            await self._client.delete(res, name, namespace, uid=uid_of(current) or None)

    async def _create(self, obj: dict[str, Any]) -> None:
        try:
            await self._client.create(_BY_KIND[obj["kind"]], obj)
        except AlreadyExists:
            if obj["kind"] != "ConfigMap":
                return  # a Service, policy or key pair already there is kept (Volcano never rewrites them)
            self._configmaps.pop((namespace_of(obj), name_of(obj)), None)
            await self._refresh_configmap(obj)
            return
        if obj["kind"] == "ConfigMap":
            self._configmaps[(namespace_of(obj), name_of(obj))] = dict(obj.get("data") or {})

    async def _refresh_configmap(self, obj: dict[str, Any]) -> None:
        namespace, name = namespace_of(obj), name_of(obj)
        key = (namespace, name)
        data = dict(obj.get("data") or {})
        if self._configmaps.get(key) == data:
            return
        try:
            current = await self._client.get(CONFIG_MAPS, name, namespace)
        except NotFound:
            await self._create(obj)
            return
        if (current.get("data") or {}) != data:
            stale = {k: None for k in current.get("data") or {} if k not in data}
            await self._client.patch(CONFIG_MAPS, name, {"data": {**stale, **data}}, namespace)
        self._configmaps[key] = data

    async def ensure_pvcs(self, job: Job, job_doc: Mapping[str, Any], controlled: dict[str, str]) -> bool:
        """`createJobIOIfNotExist`; True when volume claim names were generated and written to the Job spec."""
        volumes = [dict(v) for v in (job_doc.get("spec") or {}).get("volumes") or []]
        named = False
        for volume in volumes:
            claim = str(volume.get("volumeClaimName") or "")
            if not claim:
                claim = volume["volumeClaimName"] = f"{job.name}-pvc-" + "".join(
                    secrets.choice(_PVC_CHARS) for _ in range(12))
                named = True
            if volume.get("volumeClaim") is not None:
                await self._ensure_pvc(job, claim, volume["volumeClaim"], job_doc)
            elif not await self._pvc_exists(job.namespace, claim):
                raise PvcMissing(f"pvc {claim} is not found, the job will be in the Pending state until the PVC "
                                 "is created")
            controlled[f"volume-pvc-{claim}"] = claim
        if named:
            await self._client.patch(VC_JOBS, job.name, {"spec": {"volumes": volumes}}, job.namespace)
        return named

    async def _pvc_exists(self, namespace: str, name: str) -> bool:
        if (namespace, name) in self._pvcs:
            return True
        try:
            await self._client.get(PVCS, name, namespace)
        except NotFound:
            return False
        self._pvcs.add((namespace, name))
        return True

    async def _ensure_pvc(self, job: Job, name: str, claim: Mapping[str, Any], job_doc: Mapping[str, Any]) -> None:
        if await self._pvc_exists(job.namespace, name):
            return
        meta: dict[str, Any] = {"name": name, "namespace": job.namespace,
                                "ownerReferences": [owner_reference(job_shape(job_doc))]}
        pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": dict(claim)}
        with contextlib.suppress(AlreadyExists):
            await self._client.create(PVCS, pvc)
        self._pvcs.add((job.namespace, name))


def _with_keys(job_doc: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The ssh Secret with a freshly generated key pair (unless `--ssh-private-key` was given)."""
    for obj in job_resources(job_doc, ssh_keypair=generate_keypair()):
        if obj["kind"] == "Secret" and name_of(obj) == name:
            return obj
    raise RuntimeError(f"ssh plugin gave no Secret {name}")
