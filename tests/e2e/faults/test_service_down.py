"""The service down (both processes: no webhook, no extender, no controllers): ordinary `default-scheduler` pods
are still created and scheduled, as in the shipped configuration where Lapilli's kube-scheduler runs next to the
cluster's own; creating a Volcano Job fails with an error that names the webhook Lapilli registers and its
address; once the service is back, the same Job is admitted and runs."""

from __future__ import annotations

import yaml

from assembly.dev.schedconfig import IN_CLUSTER_PROFILES, in_cluster
from lapilli.kube.resources import PODS
from tests.e2e.faults.helpers import NS, gang_job, start_service, stop_service, submit, wait_completed
from tests.e2e.test_controller_helpers import eventually


def plain_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "annotations": {"sim.lapilli.io/duration": "1s"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}


def test_the_shipped_configuration_leaves_default_scheduler_pods_alone():
    """In a cluster, Lapilli's kube-scheduler serves only `volcano`: the cluster's own scheduler (no extender)
    keeps scheduling everything else whatever state the service is in."""
    for version in ("v1beta1", "v1"):
        config = in_cluster(version)
        assert [p["schedulerName"] for p in config["profiles"]] == list(IN_CLUSTER_PROFILES) == ["volcano"]


async def test_ordinary_pods_run_and_volcano_jobs_are_refused_by_name_while_the_service_is_down(faults, tmp_path):
    api = faults.client
    assert api is not None and faults.info is not None
    port = faults.info.ports["lapilli-webhook"]
    rec = stop_service(faults)
    try:
        await api.create(PODS, plain_pod("while-down"), NS)

        async def succeeded() -> bool:
            pod = await api.get(PODS, "while-down", NS)
            return (pod.get("status") or {}).get("phase") == "Succeeded"

        await eventually(succeeded, 60, "a default-scheduler pod scheduled and run while the service is down")

        path = tmp_path / "refused.yaml"
        path.write_text(yaml.safe_dump(gang_job("refused")))
        proc = faults.kubectl("create", "-f", str(path), check=False)
        assert proc.returncode != 0
        last = proc.stderr.strip().splitlines()[-1]
        assert 'failed calling webhook "mutatejob.volcano.sh"' in last, last
        assert f"https://127.0.0.1:{port}/jobs/mutate" in last, last
    finally:
        await start_service(faults, rec)
    await submit(api, gang_job("refused"))
    await wait_completed(api, ["refused"], 90)
    await api.delete(PODS, "while-down", NS)
