"""The service stores Pods slimmed (`lapilli.meta.slim_pod`: no volumes, mounts or conditions) for the extender's
cluster state and the controllers alike: the scheduler must read every pod exactly as it reads the whole object."""

from __future__ import annotations

import copy
from typing import Any

from extender.engine.snapshot import Snapshot, add_object
from lapilli.meta import slim_pod

STAMP = "2026-11-26T12:00:00Z"


def pod(i: int) -> dict[str, Any]:
    """A pod with everything the scheduler reads (requests, init containers, overhead, host ports, affinity,
    spread, tolerations, priority, a gang, vGPU cards) beside what a server adds (a token volume, mounts, a PVC,
    conditions, container statuses)."""
    mount = {"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}", "resourceVersion": str(i),
                     "creationTimestamp": STAMP, "labels": {"app": "a", "volcano.sh/task-spec": "w"},
                     "annotations": {"scheduling.k8s.io/group-name": "g", "volcano.sh/vgpu-ids-new": "GPU-0,NVIDIA,1024,30:;"},
                     "ownerReferences": [{"kind": "Job", "name": "j", "uid": "j", "controller": True}]},
        "spec": {
            "schedulerName": "volcano", "nodeName": "n0" if i % 2 else "", "priority": 7, "priorityClassName": "high",
            "overhead": {"cpu": "100m"}, "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "a"}}}],
            "volumes": [{"name": "kube-api-access-x", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}, "volumeMounts": [mount]}],
            "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi", "volcano.sh/vgpu-number": "1"},
                                          "limits": {"nvidia.com/gpu": "1"}},
                            "volumeMounts": [mount, {"name": "data", "mountPath": "/data"}]}],
        },
        "status": {"phase": "Running" if i % 2 else "Pending", "qosClass": "Burstable",
                   "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": STAMP}],
                   "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0}]},
    }


def test_the_scheduler_reads_a_slimmed_pod_as_the_whole_one():
    whole, slim = Snapshot(), Snapshot()
    for i in range(2):
        add_object(whole, pod(i))
        add_object(slim, slim_pod(copy.deepcopy(pod(i))))
    assert whole.pods and slim.pods == whole.pods
