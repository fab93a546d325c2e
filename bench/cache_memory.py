"""What the service's caches hold in memory, by tracemalloc, without a cluster (issue 19: peak RSS at 5,000 nodes /
50,000 pods <= 1 GiB).

    .venv/bin/python bench/cache_memory.py [--nodes 500] [--running 16000] [--gangs 1000] [--session] [--top 8]

Builds what `lapilli serve` builds over one `lapilli.cluster.Shared` — the extender's cluster state, the controllers'
warm caches, the admission caches — and lists every kind through the real `KubeClient.list` (pages of 500, decoded
with orjson, each reflector's transform applied as a page arrives) from a stand-in that answers with restart.py's
objects as kube-apiserver 1.20 and the dev kubelet leave them: running pods bound round-robin with the
service-account token volume the ServiceAccount admission adds, the default tolerations and the Running status
the simulated kubelet writes; pending one-GPU gang pods of `volcano` with kube-scheduler's PodScheduled condition;
their PodGroups; NODES simulated nodes of 8 GPUs. managedFields are left out of the stand-in's objects (every
reflector drops them). `--session`: the session process's state instead (its Pod store keeps metadata only).

Prints what is traced after the lists, per pod, and the allocation sites holding the most. Memory, not time: the
numbers do not depend on the machine's load, and a small size gives the per-pod rate to scale by.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import orjson  # noqa: E402

from assembly.dev.nodes import NodeShape, node_name, node_object  # noqa: E402
from assembly.dev.podsim import running_patch  # noqa: E402
from assembly.serve.caches import AdmissionCaches  # noqa: E402
from bench.restart import gang_pod, podgroup, running_pod  # noqa: E402
from controller.warm import WarmCaches  # noqa: E402
from extender.service.state import ClusterState  # noqa: E402
from lapilli.cluster import Shared  # noqa: E402
from lapilli.kube import KubeClient  # noqa: E402
from lapilli.kube.resources import NODES, PODGROUPS, PODS, QUEUES  # noqa: E402

PAGE = 500
NOW = 1_790_000_000.0
STAMP = "2026-11-26T12:00:00Z"
TOLERATIONS = [{"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300} for k in ("not-ready", "unreachable")]


def served(obj: dict[str, Any], i: int) -> dict[str, Any]:
    """`obj` as kube-apiserver stores it: identity, defaults, and for a pod the ServiceAccount admission's volume."""
    obj["metadata"].update(uid=str(uuid.UUID(int=i)), resourceVersion=str(1000 + i), creationTimestamp=STAMP)
    spec = obj.get("spec")
    if obj.get("kind", "Pod") == "Pod" and spec is not None:
        token = f"kube-api-access-{i % 100000:05d}"
        spec.setdefault("schedulerName", "default-scheduler")
        spec.update(serviceAccountName="default", serviceAccount="default", dnsPolicy="ClusterFirst",
                    terminationGracePeriodSeconds=30, securityContext={}, priority=0, enableServiceLinks=True,
                    preemptionPolicy="PreemptLowerPriority", tolerations=[dict(t) for t in TOLERATIONS])
        spec["volumes"] = [{"name": token, "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                          "fieldPath": "metadata.namespace"}}]}}]}}]
        for container in spec["containers"]:
            container.update(terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File",
                             imagePullPolicy="Always", volumeMounts=[
                                 {"name": token, "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
        obj.setdefault("status", {"phase": "Pending", "qosClass": "Burstable", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
             "lastTransitionTime": STAMP, "message": "0/500 nodes are available"}]})
    return obj


def objects(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    shape = NodeShape(gpus=8)
    nodes = [served(node_object(node_name(i, args.nodes), shape, i, NOW), i) for i in range(args.nodes)]
    pods = []
    for i in range(args.running):
        pod = served(running_pod(i, args.nodes), i)
        pod["status"] = running_patch(pod, pod_ip=f"10.1.{i // 250 % 250}.{i % 250}", host_ip="10.0.0.1",
                                      now=NOW)["status"]
        pods.append(pod)
    pods += [served(gang_pod(g, t), args.running + 4 * g + t) for g in range(args.gangs) for t in range(4)]
    podgroups = [served(podgroup(g, 4), g) for g in range(args.gangs)]
    queue = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"},
             "spec": {"weight": 1}, "status": {"state": "Open"}}
    return {NODES.path(None): nodes, PODS.path(None): pods, PODGROUPS.path(None): podgroups,
            QUEUES.path(None): [served(queue, 0)]}


class StandIn(KubeClient):
    """Answers list pages from encoded bytes, as kube-apiserver would; nothing else."""

    def __init__(self, lists: dict[str, list[dict[str, Any]]]) -> None:  # no connection: only `request` is used
        self.pages = {path: [orjson.dumps({"kind": "List", "items": items[at:at + PAGE], "metadata": {
            "resourceVersion": "1", **({"continue": str(at + PAGE)} if at + PAGE < len(items) else {})}})
            for at in range(0, len(items), PAGE)] for path, items in lists.items()}

    async def request(self, method: str, path: str, *, params: Any = None, body: Any = None,
                      content_type: str = "") -> dict[str, Any]:
        pages = self.pages.get(path) or [orjson.dumps({"items": [], "metadata": {"resourceVersion": "1"}})]
        at = int((params or {}).get("continue") or 0) // PAGE
        decoded: dict[str, Any] = orjson.loads(pages[at])
        return decoded


async def measure(args: argparse.Namespace) -> None:
    client = StandIn(objects(args))
    gc.collect()
    tracemalloc.start(6)
    base = tracemalloc.take_snapshot()
    shared = Shared(client)
    state = ClusterState(client, shared=shared, whole_pods=not args.session)
    reflectors = list(state.reflectors)
    if not args.session:
        caches = AdmissionCaches(client, shared=shared)
        reflectors += [*WarmCaches(client, shared).reflectors, caches.queue_reflector, caches.job_reflector,
                       caches.namespace_reflector, caches.hypernode_reflector]
    for reflector in {id(r): r for r in reflectors}.values():  # each shared one lists once, as in the service
        await reflector.relist()
    gc.collect()
    snap = tracemalloc.take_snapshot()
    traced, peak = tracemalloc.get_traced_memory()
    pods = args.running + 4 * args.gangs
    print(f"{'session process' if args.session else 'service'}: {args.nodes} nodes, {pods} pods "
          f"({args.running} running, {args.gangs} gangs of 4): traced {traced / 2**20:.1f} MiB after the lists "
          f"(peak {peak / 2**20:.1f} MiB), {traced / pods / 1024:.2f} KiB a pod")
    for stat in snap.compare_to(base, "traceback")[:args.top]:
        where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(stat.traceback[-4:]))
        print(f"{stat.size_diff / 2**20:8.1f} MiB {stat.count_diff:>9} blocks  {where}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--running", type=int, default=16000)
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--session", action="store_true", help="the session process's state")
    parser.add_argument("--top", type=int, default=8, help="allocation sites to list")
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
