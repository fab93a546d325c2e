"""Bounded work per Job, through kube-apiserver and kubectl: absurd sizes and mistyped pod templates are denied
by Lapilli's webhook with a readable line, before the controllers see anything."""

from __future__ import annotations

import pytest
import yaml

from assembly.dev import DevCluster
from tests.e2e.test_webhook import NS, denied, unique
from tests.service.reviews import job, task

WEBHOOK = "validatejob.volcano.sh"


@pytest.fixture(scope="module")
async def cluster(control_plane: DevCluster) -> DevCluster:
    assert control_plane.info is not None and control_plane.info.service, "the control plane runs without lapilli"
    await control_plane.ensure_namespace(NS)
    return control_plane


async def test_a_job_of_two_billion_replicas_is_refused_with_the_limit(cluster, tmp_path):
    obj = job(unique("huge"), task("worker", 2**31 - 1), namespace=NS)
    message = ("spec.tasks[*].replicas: 2147483647 pods in total exceed the limit of 10000 per Job "
               "(lapilli serve --max-job-replicas)")
    denied(cluster, obj, tmp_path, WEBHOOK, message)


async def test_scaling_a_job_past_the_limit_is_refused(cluster, tmp_path):
    name = unique("grow")
    obj = job(name, task("worker", 1), namespace=NS)
    path = tmp_path / "grow.yaml"
    path.write_text(yaml.safe_dump(obj))
    cluster.kubectl("create", "-f", str(path))
    try:
        patch = '[{"op": "replace", "path": "/spec/tasks/0/replicas", "value": 20000}]'
        proc = cluster.kubectl("patch", "vcjob", "-n", NS, name, "--type=json", "-p", patch, check=False)
        assert proc.returncode != 0
        assert proc.stderr.strip().splitlines()[-1].endswith(
            f'admission webhook "{WEBHOOK}" denied the request: spec.tasks[*].replicas: 20000 pods in total exceed '
            "the limit of 10000 per Job (lapilli serve --max-job-replicas)"), proc.stderr
    finally:
        cluster.kubectl("delete", "vcjob", "-n", NS, name, "--wait=false")


async def test_a_string_for_the_template_metadata_is_refused(cluster, tmp_path):
    obj = job(unique("meta"), task("worker", 1), namespace=NS)
    obj["spec"]["tasks"][0]["template"]["metadata"] = "x"
    message = ('invalid pod template in task worker: spec.tasks[0].template.metadata: expected an object '
               '(v1.ObjectMeta), got "x"')
    denied(cluster, obj, tmp_path, WEBHOOK, message)


async def test_a_number_for_a_containers_resources_is_refused(cluster, tmp_path):
    obj = job(unique("res"), task("worker", 1), namespace=NS)
    obj["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = -1
    message = ("invalid pod template in task worker: spec.tasks[0].template.spec.containers[0].resources: "
               "expected an object (v1.ResourceRequirements), got an integer -1")
    denied(cluster, obj, tmp_path, WEBHOOK, message)


async def test_a_container_without_name_and_image_is_refused(cluster, tmp_path):
    obj = job(unique("anon"), task("worker", 1), namespace=NS)
    obj["spec"]["tasks"][0]["template"]["spec"]["containers"] = [{"ports": [{"name": "http"}]}]
    message = ("invalid pod template in task worker: "
               "spec.tasks[0].template.spec.containers[0].ports[0].containerPort: Required value")
    denied(cluster, obj, tmp_path, WEBHOOK, message)
    obj["spec"]["tasks"][0]["template"]["spec"]["containers"] = [{"resources": {}}]
    message = ("spec.task[0].template.spec.containers[0].name: Required value. "
               "template.spec.containers[0].image: Required value.")
    denied(cluster, obj, tmp_path, WEBHOOK, message)
