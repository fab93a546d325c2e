"""Shared test data for test_api.py and test_crds.py: one document per Volcano kind that, together, sets every
field of every model (test_api checks that coverage), and the loading of examples/.

Values are valid for the model *and* the CRD schema, but not always for the admission webhook (e.g. a job
networkTopology with highestTierAllowed): these documents exercise the wire format, not admission rules.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[4]
EXAMPLES_DIR = REPO / "examples"
CRD_DIR = REPO / "manifests" / "crds"
VOLCANO_GROUPS = ("scheduling.volcano.sh", "batch.volcano.sh", "bus.volcano.sh", "topology.volcano.sh")


def example_documents() -> list[tuple[str, dict[str, Any]]]:
    """(file name, document) for every non-empty YAML document of the top-level examples/*.yaml."""
    found = []
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                found.append((path.name, doc))
    return found


def is_volcano(doc: dict[str, Any]) -> bool:
    """True for a document of one of Volcano's API groups."""
    api_version = doc.get("apiVersion")
    return isinstance(api_version, str) and api_version.split("/")[0] in VOLCANO_GROUPS


def _load(text: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(textwrap.dedent(text))
    return doc


FULL_QUEUE = _load(
    """
    apiVersion: scheduling.volcano.sh/v1beta1
    kind: Queue
    metadata:
      name: full-queue
      labels: {team: research}
      annotations:
        volcano.sh/hierarchy: root/research/full-queue
        volcano.sh/hierarchy-weights: 1/2/4
      resourceVersion: "42"
      creationTimestamp: "2024-05-01T12:00:00Z"
      managedFields: [{manager: kubectl, operation: Apply}]
    spec:
      weight: 4
      capability: {cpu: "64", memory: 256Gi, nvidia.com/gpu: 8}
      reclaimable: false
      extendClusters:
      - {name: cluster-b, weight: 2, capacity: {cpu: "32", memory: 128Gi}}
      guarantee:
        resource: {cpu: 500m, memory: 1.5Gi}
      affinity:
        nodeGroupAffinity:
          requiredDuringSchedulingIgnoredDuringExecution: [group-a]
          preferredDuringSchedulingIgnoredDuringExecution: [group-b]
        nodeGroupAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution: [group-c]
          preferredDuringSchedulingIgnoredDuringExecution: [group-d]
      type: training
      parent: research
      deserved: {cpu: "16", memory: 64Gi}
      priority: 100
      dequeueStrategy: fifo
    status:
      state: Open
      unknown: 0
      pending: 1
      running: 2
      inqueue: 3
      completed: 4
      reservation:
        nodes: [node-1]
        resource: {cpu: "2"}
      allocated: {cpu: "12", memory: 24Gi, pods: 3}
    """
)

FULL_PODGROUP = _load(
    """
    apiVersion: scheduling.volcano.sh/v1beta1
    kind: PodGroup
    metadata:
      name: full-pg
      namespace: ml
      uid: 6c1f7d8e-0000-4000-8000-000000000001
      deletionTimestamp: "2024-05-01T13:00:00+00:00"
      finalizers: [lapilli.io/gang]
      ownerReferences:
      - {apiVersion: batch.volcano.sh/v1alpha1, kind: Job, name: full-job, uid: 6c1f7d8e-0000-4000-8000-000000000002,
         controller: true, blockOwnerDeletion: true}
    spec:
      minMember: 4
      minTaskMember: {master: 1, worker: 3}
      queue: ml-training
      priorityClassName: high-priority
      minResources: {cpu: "8", memory: 32Gi}
      networkTopology: {mode: soft, highestTierAllowed: 2}
      subGroupPolicy:
      - name: rack-local
        networkTopology: {mode: hard, highestTierName: rack}
        subGroupSize: 2
        minSubGroups: 1
        labelSelector:
          matchLabels: {volcano.sh/task-spec: worker}
          matchExpressions:
          - {key: volcano.sh/job-name, operator: In, values: [full-job]}
        matchLabelKeys: [volcano.sh/partition-id]
    status:
      phase: Inqueue
      conditions:
      - type: Scheduled
        status: "True"
        transitionID: 0b5f3c1e-0000-4000-8000-000000000003
        lastTransitionTime: "2024-05-01T12:00:05Z"
        reason: tasks in gang are ready to be scheduled
        message: pod group is ready
      running: 3
      succeeded: 1
      failed: 0
    """
)

FULL_JOB = _load(
    """
    apiVersion: batch.volcano.sh/v1alpha1
    kind: Job
    metadata:
      name: full-job
      namespace: ml
      generation: 3
      annotations: {volcano.sh/preemptable: "false"}
    spec:
      schedulerName: volcano
      minAvailable: 3
      volumes:
      - mountPath: /data
        volumeClaimName: dataset
      - mountPath: /scratch
        volumeClaim:
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 10Gi}}
      tasks:
      - name: master
        replicas: 1
        minAvailable: 1
        template:
          metadata: {labels: {role: master}}
          spec:
            restartPolicy: OnFailure
            containers:
            - name: main
              image: busybox:1.36
              resources: {requests: {cpu: "1", nvidia.com/gpu: 1}}
        policies:
        - {event: TaskCompleted, action: CompleteJob}
        - {events: [PodFailed, PodEvicted], action: RestartTask, timeout: 1m30s}
        topologyPolicy: single-numa-node
        maxRetry: 5
      - name: worker
        replicas: 4
        minAvailable: 2
        template:
          spec:
            containers: [{name: main, image: busybox:1.36}]
        policies:
        - {exitCode: 137, action: RestartPod}
        maxRetry: 3
        dependsOn: {name: [master], iteration: all}
        partitionPolicy:
          totalPartitions: 2
          partitionSize: 2
          networkTopology: {mode: hard, highestTierName: spine}
          minPartitions: 1
      policies:
      - {event: PodEvicted, action: RestartJob}
      - {event: "*", action: AbortJob, timeout: 10m}
      plugins:
        env: []
        svc: ["--publish-not-ready-addresses=true"]
        pytorch: ["--master=master", "--worker=worker", "--port=23456"]
      runningEstimate: 2h
      queue: ml-training
      maxRetry: 5
      ttlSecondsAfterFinished: 600
      priorityClassName: high-priority
      minSuccess: 2
      networkTopology: {mode: soft, highestTierAllowed: 1}
    status:
      state:
        phase: Running
        reason: Started
        message: all pods running
        lastTransitionTime: "2024-05-01T12:01:00Z"
      minAvailable: 3
      taskStatusCount:
        master: {phase: {Running: 1}}
        worker: {phase: {Running: 3, Pending: 1}}
      pending: 1
      running: 4
      succeeded: 0
      failed: 0
      terminating: 0
      unknown: 0
      version: 1
      retryCount: 1
      runningDuration: 5m0s
      controlledResources: {plugin-svc: svc, plugin-pytorch: pytorch, volume-pvc-dataset: dataset}
      conditions:
      - {status: Pending, lastTransitionTime: "2024-05-01T12:00:00Z"}
      - {status: Running, lastTransitionTime: "2024-05-01T12:01:00Z"}
    """
)

FULL_COMMAND = _load(
    """
    apiVersion: bus.volcano.sh/v1alpha1
    kind: Command
    metadata:
      generateName: full-job-abortjob-
      namespace: ml
    action: AbortJob
    target:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      name: full-job
      uid: 6c1f7d8e-0000-4000-8000-000000000002
      controller: true
      blockOwnerDeletion: true
    reason: Suspended
    message: suspended by vcctl
    """
)

FULL_HYPERNODE = _load(
    """
    apiVersion: topology.volcano.sh/v1alpha1
    kind: HyperNode
    metadata:
      name: spine-0
      labels: {volcano.sh/network-topology-source: label}
    spec:
      tier: 2
      tierName: spine
      members:
      - type: HyperNode
        selector:
          exactMatch: {name: leaf-0}
      - type: HyperNode
        selector:
          regexMatch: {pattern: "^leaf-[1-3]$"}
      - type: Node
        selector:
          labelMatch:
            matchLabels: {rack: r7}
            matchExpressions:
            - {key: gpu, operator: In, values: [a100, h100]}
    status:
      nodeCount: 12
      conditions:
      - type: Ready
        status: "True"
        observedGeneration: 3
        lastTransitionTime: "2024-05-01T12:00:00Z"
        reason: MembersResolved
        message: 12 nodes
    """
)

FULL_DOCUMENTS: dict[str, dict[str, Any]] = {
    "Queue": FULL_QUEUE,
    "PodGroup": FULL_PODGROUP,
    "Job": FULL_JOB,
    "Command": FULL_COMMAND,
    "HyperNode": FULL_HYPERNODE,
}
