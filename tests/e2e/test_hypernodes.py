"""HyperNodes on the real control plane (issue 17): admission denials as kubectl prints them, label discovery making
the tree, following a relabelled and a deleted node and leaving hand-made HyperNodes alone, status.nodeCount, and
the objects the controllers make for topology: a partitioned Job's PodGroup with Volcano's subGroupPolicy and
labelled pods, a plain pod's PodGroup with the networkTopology its annotations ask for.

Discovery here runs over a pool of this test's own nodes (tainted, so no other test's pods land there) with label
keys no other node carries, through the ConfigMap the dev cluster's service watches; the ConfigMap and every
HyperNode are removed afterwards."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import yaml

from assembly.dev import DevCluster
from assembly.dev.bootstrap import SERVICE_NAMESPACE, create_or_replace
from assembly.dev.topology import discovery_configmap, node_labels, parse_tiers
from controller.hypernodes.config import CONFIGMAP_NAME
from lapilli.kube import KubeClient, NotFound
from lapilli.kube.resources import CONFIG_MAPS, HYPERNODES, NODES, PODGROUPS, PODS, VC_JOBS
from lapilli.meta import labels_of, name_of
from tests.e2e.extender_helpers import eventually, open_pool

SOURCE = "volcano.sh/network-topology-source"
SPINE, LEAF = "e2e.lapilli.io/spine", "e2e.lapilli.io/leaf"
WEBHOOK = 'admission webhook "validatehypernode.volcano.sh" denied the request: '


def hypernode(name: str, tier: int, *members: tuple[str, dict[str, Any]], labels: dict | None = None) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name, **({"labels": labels} if labels else {})},
            "spec": {"tier": tier, "members": [{"type": kind, "selector": sel} for kind, sel in members]}}


def exact(name: str) -> dict[str, Any]:
    return {"exactMatch": {"name": name}}


async def delete_hypernodes(client: KubeClient, *names: str) -> None:
    for name in names:
        with contextlib.suppress(NotFound):
            await client.delete(HYPERNODES, name)


def refused(cluster: DevCluster, obj: dict[str, Any], *, update: bool = False) -> str:
    """kubectl's one line of error for creating `obj` (or for patching the stored one's spec into `obj`'s)."""
    if update:
        done = cluster.kubectl("patch", "hypernode", obj["metadata"]["name"], "--type", "merge", "-p",
                               json.dumps({"spec": obj["spec"]}), check=False)
    else:
        done = cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(obj), check=False)
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


async def test_hypernode_denials_read_in_kubectl(control_plane: DevCluster):
    client = control_plane.client
    assert client is not None
    await client.create(HYPERNODES, hypernode("e2e-leaf-a", 1, ("Node", exact("e2e-node-a"))))
    await client.create(HYPERNODES, hypernode("e2e-spine-a", 2, ("HyperNode", exact("e2e-leaf-a"))))
    try:
        await eventually(lambda: _listed(client, "e2e-spine-a"))
        cases: list[tuple[dict[str, Any], str, bool]] = [
            (hypernode("e2e-bad", 1, ("Node", {"regexMatch": {"pattern": "^gpu-("}})),
             "spec.members[0].selector.regexMatch.pattern: member regexMatch pattern '^gpu-(' is invalid: ", False),
            (hypernode("e2e-bad", 1, ("Node", {**exact("n1"), "regexMatch": {"pattern": "n.*"}})),
             "spec.members[0].selector: cannot specify more than one selector type (exactMatch, regexMatch, "
             "labelMatch); found exactMatch, regexMatch", False),
            (hypernode("e2e-bad", 1, ("Node", {})),
             "spec.members[0].selector: member selector must have one of exactMatch, regexMatch, or labelMatch", False),
            (hypernode("e2e-bad", 2, ("HyperNode", {"labelMatch": {"matchLabels": {"rack": "a"}}})),
             "spec.members[0].selector.labelMatch: only Node members can be selected by labels", False),
            (hypernode("e2e-spine-b", 2, ("HyperNode", exact("e2e-leaf-a"))),
             "member HyperNode e2e-leaf-a is already a member of HyperNode e2e-spine-a", False),
            (hypernode("e2e-leaf-a", 1, ("HyperNode", exact("e2e-spine-a"))),
             "members would form a cycle: e2e-leaf-a contains e2e-spine-a contains e2e-leaf-a", True),
        ]
        for obj, message, update in cases:
            line = refused(control_plane, obj, update=update)
            assert line.startswith("Error from server (BadRequest): ") and WEBHOOK + message in line, line
        with pytest.raises(NotFound):
            await client.get(HYPERNODES, "e2e-bad")
    finally:
        await delete_hypernodes(client, "e2e-spine-a", "e2e-leaf-a")


async def _listed(client: KubeClient, name: str) -> bool:
    """Stored, and so (a watch later) in the webhook's cache: one more read leaves time for the watch."""
    return bool(await client.get(HYPERNODES, name))


async def discovered(client: KubeClient) -> dict[tuple[int, str], list[str]]:
    """The discovered e2e tree: (tier, label value) -> sorted members, HyperNode members as their label values."""
    found = [h for h in (await client.list(HYPERNODES)).items
             if labels_of(h).get(SOURCE) == "label" and {SPINE, LEAF} & set(labels_of(h))]
    value = {name_of(h): labels_of(h).get(LEAF) or labels_of(h).get(SPINE) for h in found}
    return {(h["spec"]["tier"], value[name_of(h)]): sorted(
        value.get(m["selector"]["exactMatch"]["name"], m["selector"]["exactMatch"]["name"])
        for m in h["spec"]["members"]) for h in found}


async def node_counts(client: KubeClient) -> dict[str, int]:
    return {labels_of(h).get(LEAF) or labels_of(h).get(SPINE): (h.get("status") or {}).get("nodeCount", 0)
            for h in (await client.list(HYPERNODES)).items if {SPINE, LEAF} & set(labels_of(h))}


async def test_discovery_makes_the_tree_follows_nodes_and_leaves_hand_made_hypernodes_alone(control_plane: DevCluster):
    client = control_plane.client
    assert client is not None
    tiers = parse_tiers(f"{SPINE}=2,{LEAF}=4", 4)
    hand_made = hypernode("e2e-rack", 1, ("Node", {"regexMatch": {"pattern": "^discovery-"}}),
                          labels={LEAF: "leaf-0"})
    async with open_pool(control_plane, "test_discovery") as pool:
        names = await pool.add_nodes(4, gpus=1)
        for i, name in enumerate(names):
            await client.patch(NODES, name, {"metadata": {"labels": node_labels(i, 4, tiers)}})
        await client.create(HYPERNODES, hand_made)
        try:
            await create_or_replace(client, discovery_configmap(tiers, SERVICE_NAMESPACE, type_name="e2e"))
            want = {(1, f"leaf-{i}"): [names[i]] for i in range(4)} | {
                (2, "spine-0"): ["leaf-0", "leaf-1"], (2, "spine-1"): ["leaf-2", "leaf-3"]}
            await eventually(lambda: _equal(discovered(client), want), 30)
            await eventually(lambda: _equal(node_counts(client), {"leaf-0": 1, "leaf-1": 1, "leaf-2": 1,
                                                                  "leaf-3": 1, "spine-0": 2, "spine-1": 2}), 30)
            # names[1] moves to leaf-2 under spine-1: leaf-1 empties and goes, spine-0 keeps leaf-0 only
            await client.patch(NODES, names[1], {"metadata": {"labels": {SPINE: "spine-1", LEAF: "leaf-2"}}})
            want = {(1, "leaf-0"): [names[0]], (1, "leaf-2"): sorted([names[1], names[2]]), (1, "leaf-3"): [names[3]],
                    (2, "spine-0"): ["leaf-0"], (2, "spine-1"): ["leaf-2", "leaf-3"]}
            await eventually(lambda: _equal(discovered(client), want), 30)
            # names[3] is deleted: leaf-3 goes with it
            await client.delete(NODES, names[3])
            want = {k: v for k, v in want.items() if k != (1, "leaf-3")} | {(2, "spine-1"): ["leaf-2"]}
            await eventually(lambda: _equal(discovered(client), want), 30)
            await eventually(lambda: _equal(node_counts(client), {"leaf-0": 1, "leaf-2": 2, "spine-0": 1,
                                                                  "spine-1": 1}), 30)
            kept = await client.get(HYPERNODES, "e2e-rack")
            assert kept["spec"] == hand_made["spec"] and labels_of(kept) == {LEAF: "leaf-0"}
        finally:
            with contextlib.suppress(NotFound):
                await client.delete(CONFIG_MAPS, CONFIGMAP_NAME, SERVICE_NAMESPACE)
            leftovers = [name_of(h) for h in (await client.list(HYPERNODES)).items if {SPINE, LEAF} & set(labels_of(h))]
            await delete_hypernodes(client, *leftovers)


async def _equal(got: Any, want: Any) -> bool:
    return (await got) == want


async def test_partitioned_job_gets_volcanos_sub_group_policy_and_labelled_pods(control_plane: DevCluster):
    client = control_plane.client
    assert client is not None
    async with open_pool(control_plane, "test_partitioned_job") as pool:
        job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
               "metadata": {"name": "parted", "namespace": pool.namespace},
               "spec": {"schedulerName": "volcano", "networkTopology": {"mode": "hard", "highestTierAllowed": 2},
                        "tasks": [{"name": "worker", "replicas": 4, "template": {"spec": {
                            **pool.pod_spec({"cpu": "1"}), "restartPolicy": "Never"}},
                            "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1,
                                                "networkTopology": {"highestTierName": "leaf"}}}]}}
        created = await client.create(VC_JOBS, job)
        try:
            pg_name = f"parted-{created['metadata']['uid']}"
            pg = await eventually(lambda: _get(client, PODGROUPS, pg_name, pool.namespace), 30)
            assert pg["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
            assert pg["spec"]["subGroupPolicy"] == [{
                "name": "worker", "subGroupSize": 2, "minSubGroups": 1,
                "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
                "matchLabelKeys": ["volcano.sh/partition-id"],
                "networkTopology": {"mode": "hard", "highestTierName": "leaf"},  # mode: the CRD's default
            }]
            assert pg["spec"]["minTaskMember"] == {"worker": 2}

            async def pods() -> dict[str, tuple[str, str]] | None:
                items = [p for p in (await client.list(PODS, pool.namespace)).items
                         if name_of(p).startswith("parted-worker-")]
                return {name_of(p): (labels_of(p).get("volcano.sh/task-spec"),
                                     labels_of(p).get("volcano.sh/partition-id")) for p in items} or None

            assert await eventually(lambda: _equal(pods(), {
                "parted-worker-0": ("worker", "0"), "parted-worker-1": ("worker", "0"),
                "parted-worker-2": ("worker", "1"), "parted-worker-3": ("worker", "1")}), 30)
        finally:
            with contextlib.suppress(NotFound):
                await client.delete(VC_JOBS, "parted", pool.namespace)


async def _get(client: KubeClient, res: Any, name: str, namespace: str | None = None) -> dict | None:
    try:
        return await client.get(res, name, namespace)
    except NotFound:
        return None


async def test_plain_pod_annotations_give_its_podgroup_a_network_topology(control_plane: DevCluster):
    client = control_plane.client
    assert client is not None
    async with open_pool(control_plane, "test_plain_topology") as pool:
        notes = {"volcano.sh/network-topology-mode": "soft", "volcano.sh/network-topology-highest-tier": "1"}
        pod = await client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "solo", "namespace": pool.namespace, "annotations": notes},
            "spec": pool.pod_spec({"cpu": "1"})}, pool.namespace)
        pool.pods.append("solo")
        pg_name = f"podgroup-{pod['metadata']['uid']}"
        pool.podgroups.append(pg_name)
        pg = await eventually(lambda: _get(client, PODGROUPS, pg_name, pool.namespace), 30)
        assert pg["spec"]["networkTopology"] == {"mode": "soft", "highestTierAllowed": 1}
