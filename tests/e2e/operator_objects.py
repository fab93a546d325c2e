"""The objects other operators create on Volcano's PodGroup path, field for field as their sources write them
(read from kubeflow/training-operator v1.9 `control/podgroup_control.go` + `common/job.go` + `common/util.go`,
apache/spark `VolcanoFeatureStep.scala`, ray-project/kuberay `batchscheduler/volcano/volcano_scheduler.go`).
Owners (PyTorchJob, RayCluster, the Spark driver pod) are referenced as the operators reference them; no
operator runs here, so the test plays the operator's part."""

from __future__ import annotations

import uuid
from typing import Any

from lapilli.resources import parse_quantity

Obj = dict[str, Any]
GROUP_NAME = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"


def owner(api_version: str, kind: str, name: str, uid: str) -> Obj:
    """`metav1.NewControllerRef`."""
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True,
            "blockOwnerDeletion": True}


def podgroup(name: str, namespace: str, spec: Obj, owners: list[Obj] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def pod(name: str, namespace: str, container: Obj, *, labels: Obj, annotations: Obj, owners: list[Obj],
        restart: str = "Never", **spec: Any) -> Obj:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations,
                     "ownerReferences": owners},
        "spec": {"schedulerName": "volcano", "restartPolicy": restart, "containers": [container], **spec},
    }


def total(pods: list[Obj], resources: tuple[str, ...] = ("cpu", "memory", "nvidia.com/gpu")) -> dict[str, float]:
    """Σ container requests (limits where a resource has no request), as Volcano's queue `allocated` counts."""
    out = dict.fromkeys(resources, 0.0)
    for p in pods:
        for c in p["spec"]["containers"]:
            requests, limits = c["resources"].get("requests", {}), c["resources"].get("limits", {})
            for r in resources:
                value = requests.get(r, limits.get(r))
                out[r] += float(parse_quantity(value)) if value is not None else 0.0
    return out


# --- Kubeflow training-operator: PyTorchJob with --gang-scheduler-name=volcano --------------------------------


def pytorchjob(name: str, namespace: str, queue: str, workers: int, gpus: int) -> tuple[Obj, list[Obj]]:
    """(PodGroup, pods): the PodGroup is named like the job, minMember = all replicas, minResources from
    `CalcPGMinResources`; each pod carries the group and `volcano.sh/task-spec` = the lower-case replica type."""
    job_uid = str(uuid.uuid4())
    owners = [owner("kubeflow.org/v1", "PyTorchJob", name, job_uid)]
    replicas = {"master": 1, "worker": workers}
    world = sum(replicas.values())
    pods = []
    for rtype, count in replicas.items():
        for index in range(count):
            rank = 0 if rtype == "master" else index + 1
            env = [
                {"name": "PYTHONUNBUFFERED", "value": "1"},
                {"name": "MASTER_PORT", "value": "23456"},
                {"name": "MASTER_ADDR", "value": f"{name}-master-0"},
                {"name": "WORLD_SIZE", "value": str(world)},
                {"name": "RANK", "value": str(rank)},
            ]
            container = {
                "name": "pytorch", "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1", "--backend=nccl"],
                "env": env, "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                "resources": {"requests": {"cpu": "4", "memory": "16Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}},
            }
            labels = {"training.kubeflow.org/operator-name": "pytorchjob-controller",
                      "training.kubeflow.org/job-name": name, "training.kubeflow.org/replica-type": rtype,
                      "training.kubeflow.org/replica-index": str(index)}
            if rtype == "master":
                labels["training.kubeflow.org/job-role"] = "master"
            pods.append(pod(f"{name}-{rtype}-{index}", namespace, container, labels=labels,
                            annotations={GROUP_NAME: name, TASK_SPEC: rtype}, owners=owners, restart="OnFailure"))
    minimum = total(pods)
    pg = podgroup(name, namespace, {
        "minMember": world, "queue": queue,
        "minResources": {"cpu": str(int(minimum["cpu"])), "memory": f"{int(minimum['memory']) >> 30}Gi",
                         "nvidia.com/gpu": str(int(minimum["nvidia.com/gpu"]))},
    }, owners)
    return pg, pods


# --- Spark on Kubernetes: spark.kubernetes.scheduler.name=volcano + VolcanoFeatureStep ------------------------


def spark_app(namespace: str, queue: str, executors: int) -> tuple[Obj, Obj, list[Obj]]:
    """(PodGroup, driver pod, executor pods). The PodGroup `<appId>-podgroup` comes from the user's
    podGroupTemplateFile (queue, minMember 1 — the driver — and minResources for driver + executors); the driver
    and every executor carry `scheduling.k8s.io/group-name`; executors are created by the driver, later."""
    app_id = f"spark-{uuid.uuid4().hex}"
    prefix = f"spark-pi-{uuid.uuid4().hex[:16]}"
    labels = {"spark-app-selector": app_id, "spark-app-name": "spark-pi", "spark-version": "3.5.1"}
    annotations = {GROUP_NAME: f"{app_id}-podgroup"}
    memory = {"requests": {"cpu": "1", "memory": "1408Mi"}, "limits": {"memory": "1408Mi"}}
    driver = pod(
        f"{prefix}-driver", namespace,
        {"name": "spark-kubernetes-driver", "image": "apache/spark:3.5.1",
         "args": ["driver", "--properties-file", "/opt/spark/conf/spark.properties", "--class",
                  "org.apache.spark.examples.SparkPi",
                  "local:///opt/spark/examples/jars/spark-examples_2.12-3.5.1.jar", "1000"],
         "ports": [{"name": "driver-rpc-port", "containerPort": 7078}, {"name": "spark-ui", "containerPort": 4040}],
         "resources": memory},
        labels={**labels, "spark-role": "driver"}, annotations=annotations, owners=[],
        serviceAccountName="default",
    )
    driver["metadata"].pop("ownerReferences")
    execs = []
    for i in range(1, executors + 1):
        execs.append(pod(
            f"{prefix}-exec-{i}", namespace,
            {"name": "spark-kubernetes-executor", "image": "apache/spark:3.5.1", "args": ["executor"],
             "env": [{"name": "SPARK_EXECUTOR_ID", "value": str(i)}, {"name": "SPARK_APPLICATION_ID", "value": app_id},
                     {"name": "SPARK_DRIVER_URL",
                      "value": f"spark://CoarseGrainedScheduler@{prefix}-driver-svc.{namespace}.svc:7078"}],
             "resources": memory},
            labels={**labels, "spark-role": "executor", "spark-exec-id": str(i)}, annotations=annotations,
            owners=[],  # the driver pod, filled in once it exists
        ))
    pg = podgroup(f"{app_id}-podgroup", namespace, {
        "queue": queue, "minMember": 1,
        "minResources": {"cpu": str(1 + executors), "memory": f"{1408 * (1 + executors)}Mi"},
    })
    return pg, driver, execs


# --- KubeRay: RayCluster with batchScheduler volcano ---------------------------------------------------------


def raycluster(name: str, namespace: str, queue: str, workers: int, gpus: int) -> tuple[Obj, list[Obj]]:
    """(PodGroup, pods): `ray-<cluster>-pg`, minMember = workers + 1 (the head), minResources = the head's and
    workers' resources, status Pending, queue from the RayCluster's `volcano.sh/queue-name` label; every pod
    carries the group, `volcano.sh/task-spec` = its group (`headgroup` or the worker group) and the queue label."""
    cluster_uid = str(uuid.uuid4())
    owners = [owner("ray.io/v1", "RayCluster", name, cluster_uid)]
    group_name = f"ray-{name}-pg"
    image = "rayproject/ray:2.41.0-py310-gpu"

    def ray_pod(pod_name: str, node_type: str, group: str, container: Obj) -> Obj:
        labels = {"ray.io/cluster": name, "ray.io/node-type": node_type, "ray.io/group": group,
                  "ray.io/is-ray-node": "yes", "app.kubernetes.io/created-by": "kuberay-operator",
                  "volcano.sh/queue-name": queue}
        return pod(pod_name, namespace, container, labels=labels,
                   annotations={GROUP_NAME: group_name, TASK_SPEC: group}, owners=owners, restart="Always")

    head = ray_pod(f"{name}-head-{uuid.uuid4().hex[:5]}", "head", "headgroup", {
        "name": "ray-head", "image": image,
        "command": ["/bin/bash", "-lc", "--"],
        "args": ["ulimit -n 65536; ray start --head --dashboard-host=0.0.0.0 --num-cpus=8 --block"],
        "ports": [{"name": "gcs", "containerPort": 6379}, {"name": "dashboard", "containerPort": 8265},
                  {"name": "client", "containerPort": 10001}],
        "resources": {"requests": {"cpu": "8", "memory": "32Gi"}, "limits": {"cpu": "8", "memory": "32Gi"}},
    })
    worker_resources = {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": str(gpus)}
    pods = [head] + [
        ray_pod(f"{name}-gpu-group-worker-{uuid.uuid4().hex[:5]}", "worker", "gpu-group", {
            "name": "ray-worker", "image": image,
            "command": ["/bin/bash", "-lc", "--"],
            "args": [f"ulimit -n 65536; ray start --address={name}-head-svc.{namespace}.svc.cluster.local:6379 "
                     "--block"],
            "resources": {"requests": dict(worker_resources), "limits": dict(worker_resources)},
        })
        for _ in range(workers)
    ]
    minimum = total(pods)
    pg = podgroup(group_name, namespace, {
        "minMember": workers + 1, "queue": queue,
        "minResources": {"cpu": str(int(minimum["cpu"])), "memory": f"{int(minimum['memory']) >> 30}Gi",
                         "nvidia.com/gpu": str(int(minimum["nvidia.com/gpu"]))},
    }, owners)
    pg["status"] = {"phase": "Pending"}  # KubeRay writes it on create (Volcano's CRD has no status subresource)
    return pg, pods
