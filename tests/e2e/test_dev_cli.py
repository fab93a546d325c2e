"""`lapilli dev up | status | down` as a user runs them: detached processes (the kubelet included), the
`export KUBECONFIG=` last line, a pod run to completion, and nothing left behind after `down`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from assembly.dev.procs import ProcessRecord, is_alive
from assembly.dev.service import lapilli_argv


def lapilli(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(lapilli_argv("dev", *args, "--state-dir", str(state)), capture_output=True, text=True,
                          timeout=180)


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    done = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, env=env, timeout=90)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_up_status_down(tmp_path: Path):
    state = tmp_path / "dev"
    up = lapilli("up", "--nodes", "2", "--gpus-per-node", "4", "--label", "pool=gpu", "--taint",
                 "gpu=yes:NoSchedule", "--no-extender", state=state)
    records = []
    try:
        assert up.returncode == 0, up.stderr
        last = up.stdout.strip().splitlines()[-1]
        assert last.startswith("export KUBECONFIG=")
        kubeconfig = last.removeprefix("export KUBECONFIG=")
        status = lapilli("status", "-o", "json", state=state)
        assert status.returncode == 0, status.stdout
        report = json.loads(status.stdout)
        assert {p["name"] for p in report["processes"]} == {"etcd", "kube-apiserver", "kube-scheduler", "kubelet"}
        records = [ProcessRecord(**json.loads(f.read_text())) for f in (state / "pids").glob("*.json")]

        nodes = json.loads(kubectl(kubeconfig, "get", "nodes", "-l", "pool=gpu", "-o", "json"))["items"]
        assert len(nodes) == 2
        assert all(n["status"]["allocatable"]["nvidia.com/gpu"] == "4" for n in nodes)
        assert all(n["spec"]["taints"] == [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}] for n in nodes)

        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "cli", "annotations": {"sim.lapilli.io/duration": "1s"}},
               "spec": {"restartPolicy": "Never", "tolerations": [{"key": "gpu", "operator": "Exists"}],
                        "containers": [{"name": "c", "image": "busybox"}]}}
        kubectl(kubeconfig, "create", "-f", "-", stdin=json.dumps(pod))  # `default` has its ServiceAccount
        kubectl(kubeconfig, "wait", "pod/cli", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s")

        again = lapilli("up", state=state)
        assert again.returncode != 0 and "already runs" in again.stderr
    finally:
        down = lapilli("down", state=state)
    assert down.returncode == 0 and "kubelet" in down.stdout
    assert records and not any(is_alive(r) for r in records)
    assert lapilli("status", state=state).returncode == 1
    assert not (state / "etcd").exists()
