"""vcctl's job verbs in the lapilli CLI against the real control plane: run, list, view, delete."""

from __future__ import annotations

import pytest

from assembly.dev import DevCluster
from lapilli.kube import KubeClient
from tests.e2e.test_controller_helpers import eventually, get_job, lapilli, remove_job, running_pods, wait_phase

NS = "e2e-vcctl"


@pytest.fixture(scope="module")
async def api(control_plane: DevCluster) -> KubeClient:
    await control_plane.ensure_namespace(NS)
    assert control_plane.client is not None
    return control_plane.client


async def test_run_list_view_delete(control_plane, api):
    done = lapilli(control_plane, "job", "run", "-N", "cli-job", "-n", NS, "-r", "2", "-m", "2", "-R", "cpu=100m")
    assert (done.returncode, done.stdout) == (0, "run job cli-job successfully\n"), done.stderr
    try:
        job = await wait_phase(api, NS, "cli-job", "Running")
        assert job["spec"]["minAvailable"] == 2 and job["spec"]["schedulerName"] == "volcano"
        await running_pods(api, NS, "cli-job", 2)

        async def listed() -> list[str] | None:
            rows = lapilli(control_plane, "job", "list", "-n", NS).stdout.splitlines()
            row = next((r.split() for r in rows[1:] if r.startswith("cli-job ")), None)
            return row if row and row[2] == "Running" and row[7] == "2" else None

        row = await eventually(listed, 20, "the job listed as Running with 2 running pods")
        assert row[3:6] == ["Batch", "2", "2"]
        wide = lapilli(control_plane, "job", "list", "--all-namespaces", "--selector", "cli-").stdout.splitlines()
        assert wide[0].split()[:2] == ["Namespace", "Name"] and wide[1].split()[:2] == [NS, "cli-job"]
        view = lapilli(control_plane, "job", "view", "-N", "cli-job", "-n", NS).stdout
        assert "Name:       \tcli-job\n" in view and "Phase:\tRunning" in view and "SuccessfulCreate" in view
        done = lapilli(control_plane, "job", "delete", "-N", "cli-job", "-n", NS)
        assert (done.returncode, done.stdout) == (0, "delete job cli-job successfully\n")
        await eventually(lambda: _gone(api), 30, "the job deleted")
    finally:
        await remove_job(api, NS, "cli-job")


async def _gone(api: KubeClient) -> bool:
    return await get_job(api, NS, "cli-job") is None


async def test_errors_are_one_line(control_plane, api):
    missing = lapilli(control_plane, "job", "suspend", "-N", "no-such-job", "-n", NS)
    assert missing.returncode != 0 and 'jobs.batch.volcano.sh "no-such-job" not found' in missing.stderr
    assert lapilli(control_plane, "job", "list", "-n", "e2e-vcctl-empty").stdout == "No resources found\n"
