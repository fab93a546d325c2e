"""Helpers of the controllers' end-to-end tests (no tests here): apply manifests with kubectl, wait for Jobs,
read their pods, and remove a Job with everything it owns (the session's cluster is shared)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from assembly.dev import DevCluster
from lapilli.kube import KubeClient, NotFound
from lapilli.kube.resources import PODGROUPS, PODS, VC_JOBS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / name).read_text())


def apply(cluster: DevCluster, obj: dict[str, Any] | Path, tmp_path: Path) -> str:
    """`kubectl apply -f` a file, or an object written to one."""
    if isinstance(obj, dict):
        path = tmp_path / f"{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj))
    else:
        path = obj
    return cluster.kubectl("apply", "-f", str(path)).stdout


def lapilli(cluster: DevCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the `lapilli` CLI as a user would, against the session's cluster."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    script = Path(sys.executable).with_name("lapilli")
    return subprocess.run([str(script), *args], capture_output=True, text=True, env=env, timeout=60)


async def eventually(check: Callable[[], Awaitable[Any]], timeout_s: float = 30.0, what: str = "") -> Any:
    """Poll `check` until it returns something truthy; fail with its last answer."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"not met after {timeout_s:.0f}s: {what}; last: {last!r}")


async def get_job(client: KubeClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return await client.get(VC_JOBS, name, namespace)
    except NotFound:
        return None


def phase(job: dict[str, Any] | None) -> str:
    return str((((job or {}).get("status") or {}).get("state") or {}).get("phase") or "")


async def wait_phase(client: KubeClient, namespace: str, name: str, *phases: str, timeout_s: float = 60) -> dict:
    async def check() -> dict[str, Any] | None:
        job = await get_job(client, namespace, name)
        return job if phase(job) in phases else None

    return await eventually(check, timeout_s, f"Job {namespace}/{name} in {phases}")


async def job_pods(client: KubeClient, namespace: str, name: str) -> list[dict[str, Any]]:
    pods = (await client.list(PODS, namespace, label_selector=f"volcano.sh/job-name={name}")).items
    return sorted(pods, key=lambda p: p["metadata"]["name"])


async def running_pods(client: KubeClient, namespace: str, name: str, count: int, timeout_s: float = 60) -> list:
    async def check() -> list[dict[str, Any]] | None:
        pods = [p for p in await job_pods(client, namespace, name)
                if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
        return pods if len(pods) >= count else None

    return await eventually(check, timeout_s, f"{count} running pods of {namespace}/{name}")


async def podgroup_of(client: KubeClient, job: dict[str, Any]) -> dict[str, Any]:
    meta = job["metadata"]
    return await client.get(PODGROUPS, f"{meta['name']}-{meta['uid']}", meta["namespace"])


def env_of(pod: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod["spec"]["containers"][0].get("env") or []}


async def remove_job(client: KubeClient, namespace: str, name: str, timeout_s: float = 60) -> None:
    """Delete the Job (if any) and wait until its pods are gone too."""
    with contextlib.suppress(NotFound):
        await client.delete(VC_JOBS, name, namespace)

    async def gone() -> bool:
        return await get_job(client, namespace, name) is None and not await job_pods(client, namespace, name)

    await eventually(gone, timeout_s, f"Job {namespace}/{name} and its pods deleted")


def example_jobs() -> list[tuple[str, str]]:
    """(namespace, name) of every Volcano Job in examples/."""
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "Job" and doc.get("apiVersion", "").startswith("batch.volcano"):
                out.append((doc["metadata"].get("namespace", "default"), doc["metadata"]["name"]))
    return out


async def remove_example_jobs(client: KubeClient) -> None:
    """Tests that apply examples themselves want the shared nodes to themselves (a test before them may have left an
    example's Job running)."""
    await asyncio.gather(*(remove_job(client, ns, name) for ns, name in example_jobs()))


async def controllers_cluster(control_plane: DevCluster, namespace: str) -> DevCluster:
    """The shared control plane with the service's extender, `namespace` ready and no example Job left on it."""
    assert control_plane.info is not None and control_plane.info.extender, "needs the service with its extender"
    await control_plane.ensure_namespace(namespace)
    assert control_plane.client is not None
    await remove_example_jobs(control_plane.client)
    return control_plane
