"""Every Volcano Job and Queue in examples/ and every one Volcano ships (the `example/` directory of a Volcano
checkout named by $LAPILLI_VOLCANO_EXAMPLES, or placed beside the checkout at ../shared/reference/volcano/,
unchanged) on the real control plane: applied with kubectl as
written, each Job reaches Running (its gang bound, its pods running), each Queue is Open; Volcano's
`invalid_jobs` are refused.

Volcano's files are not committed here (they are upstream's text); CI lays them out beside the checkout, so there
that half always runs, and a missing `example/` under a present ../shared fails rather than skips. Left out on purpose are `cronjob/` and `jobflow/` (kinds
Lapilli does not serve), `deployment/deployment.yaml` and the kubecon-2019-china nginx ReplicaSets (plain pods,
tested in test_controller_queues.py), `kubecon-2019-china/spark-sample/` (the retired
scheduling.incubator.k8s.io API) and `kubecon-2019-china/task-priority/*-priority.yaml` (PriorityClasses) and the sharding ConfigMap."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from assembly.dev import DevCluster
from lapilli.kube import KubeClient, NotFound
from lapilli.kube.resources import QUEUES
from tests.e2e.test_controller_helpers import (
    EXAMPLES,
    eventually,
    get_job,
    job_pods,
    phase,
    podgroup_of,
    remove_example_jobs,
    remove_job,
)
from tests.shared import SHARED

VOLCANO_ENV = "LAPILLI_VOLCANO_EXAMPLES"
SHARED_VOLCANO = SHARED / "reference" / "volcano"


def _volcano_checkout() -> Path | None:
    if os.environ.get(VOLCANO_ENV):
        return Path(os.environ[VOLCANO_ENV])
    return SHARED_VOLCANO if SHARED.is_dir() else None


VOLCANO = _volcano_checkout()
NO_CHECKOUT = (f"no Volcano checkout on this machine (set {VOLCANO_ENV}=DIR holding Volcano's example/, or place it "
               f"at {SHARED_VOLCANO})")
LEFT_OUT = ("cronjob", "jobflow", "deployment/deployment.yaml", "nginx", "spark-sample", "-priority.yaml", "sharding")


def volcano_files() -> tuple[list[Path], list[Path]]:
    """(runnable, invalid_jobs) under Volcano's example/, the kinds Lapilli serves only."""
    if VOLCANO is None:
        return [], []
    example = VOLCANO / "example"
    files = sorted(p for p in example.rglob("*.yaml") if not any(part in str(p) for part in LEFT_OUT))
    invalid = [p for p in files if p.parent.name == "invalid_jobs"]
    return [p for p in files if p not in invalid and _volcano_kinds(p)], invalid


def _volcano_kinds(path: Path) -> bool:
    kinds = {d.get("kind") for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)}
    return bool(kinds) and kinds <= {"Job", "Queue", "ConfigMap", "Service"}


def params(paths: list[Path]) -> list[Any]:
    if VOLCANO is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_CHECKOUT))]
    assert VOLCANO is not None
    return [pytest.param(p, id=str(p.relative_to(VOLCANO))) for p in paths]


SHIPPED, INVALID = volcano_files()
# queues other files' jobs name: applied first, removed last
PREREQUISITES = [VOLCANO / "example" / "hierarchical-jobs" / "queues.yaml"] if VOLCANO is not None else []
OURS = sorted(p for p in EXAMPLES.glob("*.yaml")
              if any(d.get("kind") == "Job" for d in yaml.safe_load_all(p.read_text()) if isinstance(d, dict)))


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def jobs_in(path: Path) -> list[tuple[str, str]]:
    return [(d["metadata"].get("namespace", "default"), d["metadata"]["name"])
            for d in docs(path) if d["kind"] == "Job" and d["apiVersion"].startswith("batch.volcano.sh")]


def queues_in(path: Path) -> list[str]:
    return [d["metadata"]["name"] for d in docs(path) if d["kind"] == "Queue"]


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster):
    assert control_plane.info is not None and control_plane.info.extender, "needs the service with its extender"
    assert control_plane.client is not None
    await remove_example_jobs(control_plane.client)
    await control_plane.ensure_namespace("ml")
    control_plane.kubectl("apply", "-f", str(EXAMPLES / "priorityclass-high-priority.yaml"),
                          "-f", str(EXAMPLES / "queues-for-examples.yaml"))
    for path in PREREQUISITES:
        control_plane.kubectl("apply", "-f", str(path))
    yield control_plane
    for path in PREREQUISITES:
        for name in queues_in(path):
            with contextlib.suppress(NotFound):
                await control_plane.client.delete(QUEUES, name)


async def diagnosis(api: KubeClient, ns: str, name: str) -> dict[str, Any]:
    """What a failure message needs: the Job's phase, its PodGroup's phase and conditions, its pods' phases."""
    job = await get_job(api, ns, name)
    out: dict[str, Any] = {"phase": phase(job)}
    if job:
        with contextlib.suppress(NotFound):
            status = (await podgroup_of(api, job)).get("status") or {}
            out["podgroup"] = (status.get("phase"), [c.get("message") for c in status.get("conditions") or []])
    out["pods"] = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in await job_pods(api, ns, name)}
    return out


async def all_running(api: KubeClient, jobs: list[tuple[str, str]], timeout_s: float = 120) -> None:
    if not jobs:
        return

    async def check() -> dict[str, str] | None:
        phases = {f"{ns}/{name}": phase(await get_job(api, ns, name)) for ns, name in jobs}
        return None if any(p != "Running" for p in phases.values()) else phases

    try:
        await eventually(check, timeout_s, f"{jobs} Running")
    except AssertionError:
        found = {f"{ns}/{name}": await diagnosis(api, ns, name) for ns, name in jobs}
        raise AssertionError(f"not all Running after {timeout_s:.0f}s: {found}") from None


async def queue_open(api: KubeClient, name: str) -> bool:
    return ((await api.get(QUEUES, name)).get("status") or {}).get("state") == "Open"


async def apply_and_run(cluster: DevCluster, path: Path) -> None:
    api = cluster.client
    assert api is not None
    jobs = jobs_in(path)
    await asyncio.gather(*(remove_job(api, ns, name) for ns, name in jobs))
    cluster.kubectl("apply", "-f", str(path))  # unchanged
    fresh = [q for q in queues_in(path) if path not in PREREQUISITES]
    try:
        for name in queues_in(path):
            await eventually(lambda name=name: queue_open(api, name), 30, f"queue {name} Open")
        await all_running(api, jobs)
    finally:
        await asyncio.gather(*(remove_job(api, ns, name) for ns, name in jobs))
        for name in fresh:
            with contextlib.suppress(NotFound):
                await api.delete(QUEUES, name)


# Volcano's MindSpore GPU example (a BestEffort master, GPU workers, per-role minimums) needs the gang plugin to
# count a role's pending BestEffort tasks, as Volcano's CheckTaskReady does.
def test_volcano_examples_are_found():
    if VOLCANO is None:
        pytest.skip(NO_CHECKOUT)
    assert (VOLCANO / "example").is_dir(), f"no example/ under {VOLCANO}"
    assert len(SHIPPED) >= 10 and INVALID, f"{len(SHIPPED)} runnable and {len(INVALID)} invalid examples under {VOLCANO}"


@pytest.mark.parametrize("path", params(SHIPPED))
async def test_volcano_example_runs_unchanged(cluster, path):
    await apply_and_run(cluster, path)


@pytest.mark.parametrize("path", OURS, ids=[p.name for p in OURS])
async def test_our_example_job_runs_unchanged(cluster, path):
    await apply_and_run(cluster, path)


@pytest.mark.parametrize("path", params(INVALID))
async def test_volcano_invalid_job_is_refused(cluster, path):
    refused = cluster.kubectl("apply", "-f", str(path), check=False)
    assert refused.returncode != 0 and 'denied the request' in refused.stderr, refused.stderr
