"""Deleting what a deleted Job leaves behind: pods, PodGroup, plugin objects and the PVCs it created.

Everything the Job controller creates carries the Job as controller owner, so a cluster with a garbage collector
would delete it all by itself. Not every cluster Lapilli runs against has one (the dev cluster has no
controller-manager), so the controller also deletes explicitly: when it sees the Job's DELETED event, and once
at start for Jobs deleted while it was not running. Only objects owned by the deleted incarnation (its UID)
are touched: a namesake Job created right after keeps its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from controller.context import Context
from controller.jobs.podgroup import podgroup_name
from controller.jobs.requests import job_owner
from controller.jobs.resources import PVCS, PluginResources, plugin_object_names
from lapilli.kube import ApiError, Conflict, NotFound
from lapilli.kube.resources import PODGROUPS, PODS, VC_JOBS, Resource
from lapilli.meta import Obj, name_of, namespace_of, uid_of

log = logging.getLogger(__name__)

# Listed by the orphan sweep: only PVCs (their names are random, kept in the status of a Job that is gone). The
# plugins' Services, ConfigMaps, Secrets and NetworkPolicies have names derived from the Job's, so they are
# deleted by name for every gone Job the sweep finds: the service never lists Secrets (least privilege).
SWEPT: Final[tuple[Resource, ...]] = (PVCS,)


class Cleanup:
    def __init__(self, ctx: Context, plugins: PluginResources) -> None:
        self.ctx = ctx
        self.plugins = plugins
        self.deleted = 0

    async def job_deleted(self, job_doc: Obj) -> None:
        """The Job is gone: delete its pods, its PodGroup, its plugin objects and the PVCs it made."""
        # Read from the raw object, not the Job model: a Job the model refuses (stored while no webhook checked it)
        # still leaves children behind, and its deletion is retried until they are gone.
        name, namespace, uid = name_of(job_doc), namespace_of(job_doc), uid_of(job_doc)
        key = f"{namespace}/{name}"
        pods = [p for p in self.ctx.pods.by_index("job", key) if (job_owner(p) or {}).get("uid") == uid]
        await asyncio.gather(*(self._delete(PODS, p, linger=True) for p in pods))
        pg = self.ctx.podgroups.get(f"{namespace}/{podgroup_name(name, uid)}")
        stub = {"metadata": {"name": podgroup_name(name, uid), "namespace": namespace, "uid": ""}}
        await self._delete(PODGROUPS, pg or stub, linger=False)
        for res, obj_name, _plugin in plugin_object_names(name):
            await self.plugins.delete_owned(res, obj_name, namespace, uid)
        controlled = (job_doc.get("status") or {}).get("controlledResources")
        claims = controlled.items() if isinstance(controlled, dict) else ()
        for claim in (v for k, v in claims if str(k).startswith("volume-pvc-") and isinstance(v, str)):
            await self.plugins.delete_owned(PVCS, claim, namespace, uid)
        log.info("job %s: deleted %d pods and the objects it owned", key, len(pods))

    async def _delete(self, res: Resource, obj: Obj, *, linger: bool) -> None:
        async with self.ctx.pod_gate:
            try:
                await self.ctx.client.delete(res, name_of(obj), namespace_of(obj), uid=uid_of(obj) or None)
                self.deleted += 1
            except (NotFound, Conflict):
                pass
        stores = {PODS: self.ctx.pods, PODGROUPS: self.ctx.podgroups}
        if uid_of(obj) and res in stores:
            stores[res].deleted(obj, linger=linger)

    async def sweep(self) -> None:
        """Delete objects whose owning Job no longer exists (deleted while we were not watching)."""
        live = {uid_of(j) for j in self.ctx.jobs.values()}
        gone: dict[tuple[str, str, str], bool] = {}
        candidates: list[tuple[Resource, Obj]] = [(PODS, p) for p in self.ctx.pods.values()]
        candidates += [(PODGROUPS, pg) for pg in self.ctx.podgroups.values()]
        for res in SWEPT:
            try:
                candidates += [(res, o) for o in (await self.ctx.client.list(res)).items]
            except ApiError as exc:
                log.warning("orphan sweep: cannot list %s: %s", res.plural, exc)
        for res, obj in candidates:
            owner = job_owner(obj)
            if owner is None or owner.get("uid") in live:
                continue
            ident = (namespace_of(obj), str(owner.get("name")), str(owner.get("uid")))
            if ident not in gone:
                gone[ident] = await self._owner_gone(*ident)
            if gone[ident]:
                await self._delete(res, obj, linger=res is PODS)
        for (namespace, name, uid), is_gone in gone.items():
            if is_gone:
                for res, obj_name, _plugin in plugin_object_names(name):
                    await self.plugins.delete_owned(res, obj_name, namespace, uid)

    async def _owner_gone(self, namespace: str, name: str, uid: str) -> bool:
        try:
            current = await self.ctx.client.get(VC_JOBS, name, namespace)
        except NotFound:
            return True
        return uid_of(current) != uid
