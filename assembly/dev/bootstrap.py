"""What a fresh dev cluster needs before Lapilli can run on it: CRDs, RBAC, queues, namespaces with SAs.

There is no controller-manager: nothing creates the `default` ServiceAccount of a namespace (pods are
refused without it) and no garbage collector runs, so `ensure_namespace` makes both namespace and SA.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import yaml

from lapilli.kube import AlreadyExists, KubeClient, resource_for
from lapilli.kube.resources import CRDS, NAMESPACES, QUEUES, SERVICE_ACCOUNTS
from lapilli.meta import meta, name_of, namespace_of, resource_version

SERVICE_NAMESPACE: Final = "lapilli-system"
# Volcano's two standing queues: `root` heads the hierarchy and is never reclaimed from; `default` takes jobs
# that name no queue.
STANDING_QUEUES: Final = (
    ("root", {"weight": 1, "reclaimable": False}),
    ("default", {"weight": 1, "reclaimable": True}),
)


class BootstrapError(RuntimeError):
    """The manifests are missing or the API server did not accept them in time."""


def manifests_dir() -> Path:
    """$LAPILLI_MANIFESTS, else the repository's `manifests/` next to the package (editable installs)."""
    env = os.environ.get("LAPILLI_MANIFESTS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "manifests"
    if not path.is_dir():
        raise BootstrapError(f"no manifests directory at {path}; set LAPILLI_MANIFESTS to the repository's manifests/")
    return path


def load_objects(files: Iterable[Path]) -> list[dict[str, Any]]:
    """Kubernetes objects from multi-document YAML files; kustomization files and empty documents skipped."""
    objects = []
    for file in sorted(files):
        for doc in yaml.safe_load_all(file.read_text()):
            if isinstance(doc, dict) and doc.get("kind") and not str(doc.get("apiVersion", "")).startswith(
                "kustomize.config.k8s.io/"
            ):
                objects.append(doc)
    return objects


async def create_or_replace(client: KubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """Create the object, or replace the existing one (re-running a bootstrap converges)."""
    res = resource_for(obj["apiVersion"], obj["kind"])
    try:
        return await client.create(res, obj)
    except AlreadyExists:
        current = await client.get(res, name_of(obj), namespace_of(obj) or None)
        replacement = {**obj, "metadata": {**meta(obj), "resourceVersion": resource_version(current)}}
        return await client.replace(res, replacement)


async def ensure_namespace(client: KubeClient, name: str) -> None:
    """The namespace and its `default` ServiceAccount (what the missing controller-manager would add)."""
    for res, obj in (
        (NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        (SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": "default", "namespace": name}}),
    ):
        with contextlib.suppress(AlreadyExists):
            await client.create(res, obj)


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def install_crds(client: KubeClient, crd_dir: Path, *, timeout_s: float = 30.0) -> list[str]:
    """Install every CRD in `crd_dir` and wait until each is Established; returns their names."""
    crds = [o for o in load_objects(crd_dir.glob("*.yaml")) if o["kind"] == "CustomResourceDefinition"]
    if not crds:
        raise BootstrapError(f"no CustomResourceDefinition in {crd_dir}/*.yaml")
    await asyncio.gather(*(create_or_replace(client, crd) for crd in crds))
    names = [name_of(crd) for crd in crds]
    deadline = time.monotonic() + timeout_s
    pending = set(names)
    while pending:
        for name in sorted(pending):
            if _established(await client.get(CRDS, name)):
                pending.discard(name)
        if pending:
            if time.monotonic() > deadline:
                raise BootstrapError(f"CRDs not Established after {timeout_s:.0f}s: {', '.join(sorted(pending))}")
            await asyncio.sleep(0.1)
    return names


async def create_standing_queues(client: KubeClient) -> None:
    """`root` and `default`, Open (state is status, so it is set through the status subresource)."""
    for name, spec in STANDING_QUEUES:
        queue = {"apiVersion": QUEUES.api_version, "kind": "Queue", "metadata": {"name": name}, "spec": spec}
        with contextlib.suppress(AlreadyExists):
            await client.create(QUEUES, queue)
        await client.patch_status(QUEUES, name, {"status": {"state": "Open"}})


# The dev cluster runs every component in one `lapilli serve` as ServiceAccount lapilli; installed, the extender
# runs in the scheduler pod as lapilli-scheduler. So here lapilli also holds the extender's role: the union of
# the two accounts, and nothing beyond the shipped roles.
DEV_EXTENDER_BINDING: Final = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
    "metadata": {"name": "lapilli-dev-extender"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "lapilli-extender"},
    "subjects": [{"kind": "ServiceAccount", "name": "lapilli", "namespace": SERVICE_NAMESPACE}],
}
# ... and the extender's Role for the vGPU device config in kube-system.
DEV_VGPU_CONFIG_BINDING: Final = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
    "metadata": {"name": "lapilli-dev-vgpu-config", "namespace": "kube-system"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lapilli-vgpu-config"},
    "subjects": [{"kind": "ServiceAccount", "name": "lapilli", "namespace": SERVICE_NAMESPACE}],
}
DEV_HISTORY_BINDING: Final = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
    "metadata": {"name": "lapilli-dev-history", "namespace": SERVICE_NAMESPACE},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lapilli-history"},
    "subjects": [{"kind": "ServiceAccount", "name": "lapilli", "namespace": SERVICE_NAMESPACE}],
}


async def install_rbac(client: KubeClient, rbac_dir: Path) -> None:
    """Lapilli's own ServiceAccounts, roles and bindings (the same manifests a real install applies), and the
    extender's roles for the one dev service."""
    await ensure_namespace(client, SERVICE_NAMESPACE)
    for obj in [*load_objects(rbac_dir.glob("*.yaml")), DEV_EXTENDER_BINDING, DEV_VGPU_CONFIG_BINDING,
                DEV_HISTORY_BINDING]:
        await create_or_replace(client, obj)


async def bootstrap(client: KubeClient, manifests: Path) -> None:
    """Everything a fresh cluster needs, in dependency order (queues need their CRD)."""
    await asyncio.gather(
        install_rbac(client, manifests / "rbac"),
        ensure_namespace(client, "default"),
        install_crds(client, manifests / "crds"),
    )
    await create_standing_queues(client)
