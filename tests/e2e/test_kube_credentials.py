"""Credentials users really have, against the real kube-apiserver: a kubeconfig whose user is an `exec` plugin
(a real script printing an ExecCredential, `client.authentication.k8s.io/v1` and `v1beta1`) or a `tokenFile`,
for `lapilli queue list` / `lapilli job list`, and a plugin credential that expires and is fetched again (the
rotated token is the one sent). The dev control plane authenticates static tokens (`--token-auth-file`); the
plugin hands out the admin's."""

from __future__ import annotations

import asyncio
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from assembly.dev import DevCluster
from assembly.dev.service import lapilli_argv
from lapilli.kube import KubeClient, load_kubeconfig
from lapilli.kube.errors import ApiError
from lapilli.kube.resources import QUEUES

EXEC_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


def _admin_token(cluster: DevCluster) -> str:
    doc = yaml.safe_load(cluster.kubeconfig.read_text())
    return str(doc["users"][0]["user"]["token"])


def _with_user(cluster: DevCluster, path: Path, user: dict[str, Any]) -> Path:
    """The dev cluster's kubeconfig (server, CA) with another user."""
    doc = yaml.safe_load(cluster.kubeconfig.read_text())
    doc["users"] = [{"name": "someone", "user": user}]
    doc["contexts"][0]["context"]["user"] = "someone"
    path.write_text(yaml.safe_dump(doc))
    return path


def _plugin(directory: Path, api_version: str, expires_in_s: int | None) -> tuple[Path, Path, Path]:
    """(script, token file it hands out, file counting its runs)."""
    token, runs = directory / "token", directory / "runs"
    runs.write_text("")
    script = directory / "credential-plugin"
    script.write_text(f"""#!{sys.executable}
import datetime, json, os, pathlib
assert json.loads(os.environ["KUBERNETES_EXEC_INFO"])["apiVersion"] == {api_version!r}
with open({str(runs)!r}, "a") as f:
    f.write("run\\n")
status = {{"token": pathlib.Path({str(token)!r}).read_text().strip()}}
if {expires_in_s!r} is not None:
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={expires_in_s!r})
    status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({{"apiVersion": {api_version!r}, "kind": "ExecCredential", "status": status}}))
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, token, runs


def _cli(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(lapilli_argv(*args, "--kubeconfig", str(kubeconfig)), capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("api_version", EXEC_VERSIONS)
async def test_queue_and_job_list_with_an_exec_plugin(control_plane: DevCluster, tmp_path: Path, api_version: str):
    script, token, runs = _plugin(tmp_path, api_version, expires_in_s=None)
    token.write_text(_admin_token(control_plane))
    kubeconfig = _with_user(control_plane, tmp_path / "kubeconfig", {"exec": {
        "apiVersion": api_version, "command": str(script), "interactiveMode": "Never"}})
    queues = _cli(kubeconfig, "queue", "list")
    assert queues.returncode == 0, queues.stderr
    assert "default" in queues.stdout.split()
    jobs = _cli(kubeconfig, "job", "list", "--all-namespaces")
    assert jobs.returncode == 0, jobs.stderr
    assert runs.read_text().count("run") == 2  # one run per command: each is its own process
    token.write_text("not-a-token-the-server-knows")
    refused = _cli(kubeconfig, "queue", "list")
    assert refused.returncode != 0 and "Unauthorized" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


async def test_queue_list_with_a_token_file(control_plane: DevCluster, tmp_path: Path):
    (tmp_path / "token").write_text(_admin_token(control_plane) + "\n")
    kubeconfig = _with_user(control_plane, tmp_path / "kubeconfig", {"tokenFile": "token"})  # relative to the file
    queues = _cli(kubeconfig, "queue", "list")
    assert queues.returncode == 0, queues.stderr
    assert "default" in queues.stdout.split()


async def test_an_expired_plugin_credential_is_fetched_again_and_sent(control_plane: DevCluster, tmp_path: Path):
    script, token, runs = _plugin(tmp_path, EXEC_VERSIONS[0], expires_in_s=2)
    token.write_text(_admin_token(control_plane))
    kubeconfig = _with_user(control_plane, tmp_path / "kubeconfig", {"exec": {
        "apiVersion": EXEC_VERSIONS[0], "command": str(script)}})
    async with KubeClient(load_kubeconfig(kubeconfig)) as client:
        await client.get(QUEUES, "default")
        await client.get(QUEUES, "default")
        assert runs.read_text().count("run") == 1, "a credential that has not expired is reused"
        token.write_text("rotated-to-something-unknown")
        await asyncio.sleep(2.5)
        with pytest.raises(ApiError) as refused:
            await client.get(QUEUES, "default")
        assert refused.value.status == 401, "the expired credential was fetched again and the new one sent"
        token.write_text(_admin_token(control_plane))
        await asyncio.sleep(2.5)
        assert (await client.get(QUEUES, "default"))["metadata"]["name"] == "default"
        assert runs.read_text().count("run") >= 3
