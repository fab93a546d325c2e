"""`lapilli dashboard` in a real headless chromium against the control plane: the page loads with no console
error, shows a scenario's jobs with their reasons, and updates (its script, no reload) when a job starts. The
screenshots are kept as artifacts in `$LAPILLI_ARTIFACTS` (default `build/artifacts/` of the checkout; their paths
are printed): README's docs/dashboard.png is taken from there."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from assembly.dev import DevCluster
from lapilli.history import HISTORY_CONFIGMAP, HISTORY_KEY, HISTORY_NAMESPACE, History
from lapilli.kube.errors import NotFound
from lapilli.kube.resources import CONFIG_MAPS, HYPERNODES, PODGROUPS, QUEUES
from tests.e2e.browser import chromium, open_page
from tests.e2e.extender_helpers import Pool, eventually, open_pool
from tests.e2e.test_why import ONE, SLOT, api, gang, make_queue, running


@pytest.fixture
async def pool(control_plane: DevCluster, request: pytest.FixtureRequest) -> AsyncIterator[Pool]:
    async with open_pool(control_plane, request.node.name) as p:
        yield p


ARTIFACTS = Path(os.environ.get("LAPILLI_ARTIFACTS") or Path(__file__).resolve().parents[2] / "build" / "artifacts")


@pytest.fixture
def dashboard(control_plane: DevCluster) -> Iterator[str]:
    """`lapilli dashboard --port 0` as a user runs it (their kubeconfig); yields its URL."""
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}
    script = Path(sys.executable).with_name("lapilli")
    proc = subprocess.Popen([str(script), "dashboard", "--port", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "dashboard on http://127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() else "")
        yield line.split()[2]
    finally:
        proc.terminate()
        proc.wait(10)


async def test_dashboard_in_chromium(pool: Pool, dashboard: str, tmp_path: Path) -> None:
    assert chromium() is not None, "chromium is missing: `make test` installs it (apt-get install chromium)"
    await pool.add_nodes(1, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "lab", capability={SLOT: "2"})
    await gang(pool, "small", 1, queue, ONE)
    await running(pool, "small")
    await gang(pool, "wide", 2, queue, ONE)  # 1 + 2 > capability 2: not admitted
    async with open_page(tmp_path / "profile") as page:
        await page.goto(dashboard)
        key = f"{pool.namespace}/wide"

        async def shown() -> str | None:
            text = await page.text("live")
            row = next((line for line in text.splitlines() if line.strip().startswith(key)), "")
            return text if "OverCapability" in row and f"queue {queue} may use 1 more of its capability 2" in row \
                else None

        text = await eventually(shown, 60, every_s=1.0)
        assert queue in text and f"{pool.namespace}/small" in text and pool.nodes[0] in text
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = await page.screenshot(ARTIFACTS / "dashboard.png")
        print(f"dashboard screenshot: {shot}")
        await api(pool).patch(QUEUES, queue, {"spec": {"capability": {SLOT: "4"}}})

        async def started() -> bool:  # the page's own refresh, no navigation
            text = await page.text("live")
            row = next((line for line in text.splitlines() if line.strip().startswith(key)), "")
            return "Running" in row

        await eventually(started, 90, every_s=1.0)
        print(f"dashboard screenshot: {await page.screenshot(ARTIFACTS / 'dashboard-running.png')}")
        assert page.errors == [], page.errors


async def test_dashboard_shows_the_hypernode_tree_with_free_gpus(pool: Pool, dashboard: str, tmp_path: Path) -> None:
    """Issue 17: the network topology section, a spine over two leaves of this pool's nodes, each domain with the
    GPUs its nodes have free as the page's session counts them (one GPU taken by a running pod)."""
    assert chromium() is not None, "chromium is missing: `make test` installs it (apt-get install chromium)"
    first, second = await pool.add_nodes(2, gpus=4)
    client = api(pool)
    leaves = [f"{pool.name}-leaf-{i}" for i in (0, 1)]
    spine = f"{pool.name}-spine"

    def hypernode(name: str, tier: int, kind: str, *members: str) -> dict:
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                "spec": {"tier": tier, "tierName": "leaf" if tier == 1 else "spine",
                         "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}

    made = [hypernode(leaves[0], 1, "Node", first), hypernode(leaves[1], 1, "Node", second),
            hypernode(spine, 2, "HyperNode", *leaves)]
    try:
        for obj in made:
            await client.create(HYPERNODES, obj)
        pods = await pool.gang("one-gpu", 1, {"nvidia.com/gpu": "1", "cpu": "1"})
        await eventually(lambda: pool.placed(pods), 60)
        async with open_page(tmp_path / "profile") as page:
            await page.goto(dashboard)

            async def shown() -> str | None:  # the spine's row: tier (name), nodes, GPUs free
                text = await page.text("live")
                return text if re.search(rf"{re.escape(spine)}\s+2 \(spine\)\s+2\s+7 free / 8", text) else None

            text = await eventually(shown, 60, every_s=1.0)
            assert "Network topology" in text
            assert text.index(spine) < text.index(leaves[0]) < text.index(leaves[1])
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            print(f"dashboard screenshot: {await page.screenshot(ARTIFACTS / 'dashboard-topology.png')}")
            assert page.errors == [], page.errors
    finally:
        for obj in reversed(made):
            with contextlib.suppress(NotFound):
                await client.delete(HYPERNODES, obj["metadata"]["name"])


async def test_dashboard_shows_the_last_day_waits_and_idle_gpus(pool: Pool, dashboard: str, tmp_path: Path) -> None:
    """Issue 21: per queue a chart of its GPUs (allocated solid, deserved dashed; the last point is now), the waiting
    time per job, the jobs whose GPUs the leader found idle; and the page's security headers, under which its own
    script still refreshes it (no console error)."""
    assert chromium() is not None, "chromium is missing: `make test` installs it (apt-get install chromium)"
    await pool.add_nodes(1, gpus=4)
    queue = await make_queue(pool, "gpus")
    gpu = {"cpu": "1", "nvidia.com/gpu": "2"}
    await pool.gang("notebook", 1, gpu, queue=queue)
    await running(pool, "notebook")
    await pool.gang("wide", 2, {"cpu": "1", "nvidia.com/gpu": "3"}, queue=queue)  # 6 GPUs: never fits
    # What the leader writes once a job's GPUs sat idle (the idle-GPU e2e shows it written by the service).
    await api(pool).patch_status(PODGROUPS, "notebook", {"status": {"conditions": [{
        "type": "lapilli.io/IdleGPU", "status": "True", "reason": "Idle", "message": "GPUs below 5% for 1h0m0s",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, pool.namespace)
    async with aiohttp.ClientSession() as http, http.get(dashboard) as resp:
        headers = resp.headers
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
    assert headers["Content-Security-Policy"].startswith("default-src 'none'; script-src 'sha256-")
    async with open_page(tmp_path / "profile") as page:
        await page.goto(dashboard)
        idle_row = f"{pool.namespace}/notebook"

        seen: list[str] = []

        async def shown() -> str | None:
            text = await page.text("live")
            waits = await page.text("waits")
            idle = await page.text("idle")
            seen[:] = [waits, idle]
            return text if "/wide" in waits and "so far" in waits and idle_row in idle \
                and "GPUs below 5% for 1h0m0s" in idle else None

        try:
            text = await eventually(shown, 60, every_s=1.0)
        except AssertionError:
            raise AssertionError(f"waits and idle sections: {seen}") from None
        assert "Over the last day" in text and "Waiting time per job" in text and "Idle GPUs" in text
        charts = await page.call("Runtime.evaluate", returnByValue=True, expression=(
            f"document.querySelectorAll('svg.chart[data-queue=\"{queue}\"]').length"))
        assert charts["result"]["value"] == 1, charts
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        print(f"dashboard screenshot: {await page.screenshot(ARTIFACTS / 'dashboard-time.png')}")
        # The refresh script runs under the policy: the page follows the cluster without navigation.
        await api(pool).patch_status(PODGROUPS, "notebook", {"status": {"conditions": []}}, pool.namespace)

        async def cleared() -> bool:
            return idle_row not in await page.text("idle")

        await eventually(cleared, 60, every_s=1.0)
        assert page.errors == [], page.errors
    # The service's leader keeps the day in its ConfigMap, through the Role the install gives it.
    history = await eventually(lambda: _history(pool), 60)
    assert history.times and "default" in history.queues


async def _history(pool: Pool) -> History | None:
    try:
        cm = await api(pool).get(CONFIG_MAPS, HISTORY_CONFIGMAP, HISTORY_NAMESPACE)
    except NotFound:
        return None
    return History.from_json(cm["data"][HISTORY_KEY])
