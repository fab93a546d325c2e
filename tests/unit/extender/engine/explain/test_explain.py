"""`extender.engine.explain`: one snapshot per reason, run through the shipped scheduler conf, and the answer names
that reason with the right numbers — and agrees with what the same session decides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from extender.engine.explain import Context, Kind, explain
from extender.engine.run import parse_scheduler_conf, run_session
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import documents

SHIPPED = Path(__file__).resolve().parents[5] / "manifests" / "scheduler" / "lapilli-scheduler.conf"
CONF = parse_scheduler_conf(SHIPPED.read_text())
GPU = "nvidia.com/gpu"


def gpu_nodes(n: int, gpus: int = 4, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"n{i}", "alloc": {"cpu": "16", "memory": "64Gi", GPU: str(gpus)}, **extra} for i in range(n)]


def gang(ns_name: str, size: int, queue: str, *, phase: str = "Inqueue", gpus: int = 1, prio: str | None = None,
         running_on: str | None = None, **pod_extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    ns, name = ns_name.split("/")
    if running_on and phase == "Inqueue":
        phase = "Running"
    pg: dict[str, Any] = {"name": ns_name, "queue": queue, "min": size, "phase": phase,
                          "minResources": {"cpu": str(size), GPU: str(size * gpus)}}
    if prio:
        pg["priorityClassName"] = prio
    pods = []
    if phase != "Pending":
        for i in range(size):
            pod: dict[str, Any] = {"name": f"{ns}/{name}-w-{i}", "group": name,
                                   "req": {"cpu": "1", GPU: str(gpus)}, **pod_extra}
            if prio:
                pod["priorityClassName"] = prio
            if running_on:
                pod["node"], pod["phase"] = running_on, "Running"
            pods.append(pod)
    return pg, pods


def why(scenario: dict[str, Any], key: str, context: Context | None = None) -> Any:
    snap = build_snapshot(documents(scenario))
    return explain(snap, CONF, [key], context)[key]


def scenario(*gangs: tuple[dict[str, Any], list[dict[str, Any]]], **rest: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"podgroups": [g for g, _ in gangs], "pods": [p for _, ps in gangs for p in ps]}
    out.update(rest)
    return out


@pytest.mark.parametrize("phase", ["Pending", "Inqueue"])
def test_queue_missing(phase: str) -> None:
    # Inqueue: the queue was deleted after the PodGroup was admitted and its pods created.
    s = scenario(gang("u/a", 2, "nope", phase=phase), nodes=gpu_nodes(1), queues=[{"name": "default"}])
    snap = build_snapshot(documents(s))
    e = explain(snap, CONF, ["u/a"])["u/a"]
    assert e.kind is Kind.QUEUE_MISSING
    assert e.headline.startswith("queue nope does not exist: the scheduler ignores this PodGroup"), e.render()
    assert e.reasons[0].data == {"queue": "nope"} and len(e.reasons) == 1
    assert (e.queue, e.phase, e.pods) == ("nope", phase, 0 if phase == "Pending" else 2)
    # ... and the scheduler does ignore it: nothing of it is placed.
    assert not any(k.startswith("u/a-") for k in run_session(snap, CONF).binds)


def test_closed_queue_names_who_closed_it() -> None:
    s = scenario(gang("u/a", 2, "lab-a", phase="Pending"), nodes=gpu_nodes(1),
                 queues=[{"name": "lab-a", "state": "Closed"}])
    e = why(s, "u/a", Context(queue_closed_by={"lab-a": "by alice"}))
    assert e.kind is Kind.QUEUE_CLOSED
    assert "queue lab-a is Closed (closed by alice)" in e.headline
    assert e.phase == "Pending"


def test_over_capability_per_resource_with_numbers() -> None:
    running = gang("u/old", 6, "lab-a", running_on="n0")
    running[1][:] = [dict(p, node=f"n{i // 4}") for i, p in enumerate(running[1])]
    s = scenario(running, gang("u/new", 4, "lab-a", phase="Pending"), nodes=gpu_nodes(4),
                 queues=[{"name": "lab-a", "capability": {GPU: "8", "cpu": "100"}}])
    e = why(s, "u/new")
    assert e.kind is Kind.OVER_CAPABILITY, e.render()
    assert f"needs {GPU} 4; queue lab-a may use 2 more of its capability 8" in e.headline
    data = e.reasons[0].data["resources"][GPU]
    assert (data["need"], data["room"], data["limit"], data["allocated"]) == (4, 2, 8, 6)
    assert e.phase == "Pending"


def test_gang_larger_than_any_placement_is_unresolvable() -> None:
    s = scenario(gang("u/big", 3, "lab-a", gpus=8), nodes=gpu_nodes(4, gpus=4), queues=[{"name": "lab-a"}])
    e = why(s, "u/big")
    assert e.kind is Kind.UNRESOLVABLE, e.render()
    assert "nothing in the cluster can ever fit this gang" in e.headline
    assert f"0 of 3 pods placeable: 4 nodes are too small for {GPU} (need 8, have 4)" in e.headline


def test_min_resources_above_the_whole_cluster_is_unresolvable_at_admission() -> None:
    s = scenario(gang("u/big", 20, "lab-a", phase="Pending"), nodes=gpu_nodes(2), queues=[{"name": "lab-a"}])
    e = why(s, "u/big")
    assert e.kind is Kind.UNRESOLVABLE
    assert f"needs {GPU} 20; the whole cluster has 8" in e.headline


def test_taint_names_the_taint_and_node_count() -> None:
    taint = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    nodes = [*gpu_nodes(2, taints=taint), {"name": "c0", "alloc": {"cpu": "16", "memory": "64Gi"}}]
    s = scenario(gang("u/t", 4, "lab-a"), nodes=nodes, queues=[{"name": "lab-a"}])
    e = why(s, "u/t")
    assert "2 nodes are tainted dedicated=infer:NoSchedule" in e.headline, e.render()
    assert f"1 node has no {GPU} (need 1)" in e.headline


def test_behind_a_higher_priority_job_of_the_same_queue() -> None:
    s = scenario(gang("u/high", 4, "lab-a", prio="high"), gang("u/low", 4, "lab-a"), nodes=gpu_nodes(1),
                 queues=[{"name": "lab-a"}], priorityClasses=[{"name": "high", "value": 100}])
    result = explain(build_snapshot(documents(s)), CONF)
    assert result["u/high"].kind is Kind.STARTING
    e = result["u/low"]
    assert e.kind is Kind.ORDER, e.render()
    assert "u/high goes first (priority 100 > 0)" in e.headline
    assert e.reasons[0].data["position"] == 2


def test_fair_share_and_queue_order_behind_a_fairer_queue() -> None:
    # lab-a already runs 4 GPUs; both queues want 4 more of the 8: lab-b (share 0) goes first, and lab-a is at
    # its deserved share.
    s = scenario(gang("a/run", 4, "lab-a", running_on="n0"), gang("a/next", 4, "lab-a"), gang("b/next", 4, "lab-b"),
                 nodes=gpu_nodes(2), queues=[{"name": "lab-a"}, {"name": "lab-b"}])
    result = explain(build_snapshot(documents(s)), CONF)
    assert result["b/next"].kind is Kind.STARTING
    e = result["a/next"]
    kinds = [r.kind for r in e.reasons]
    assert Kind.FAIR_SHARE in kinds, e.render()
    assert f"queue lab-a holds {GPU} 4 of its deserved 4" in e.render()


def test_reclaim_not_allowed_from_a_non_reclaimable_queue() -> None:
    s = scenario(gang("b/hog", 8, "lab-b", running_on="n0"), gang("a/want", 4, "lab-a"),
                 nodes=gpu_nodes(2), queues=[{"name": "lab-a"}, {"name": "lab-b", "reclaimable": False}])
    s["pods"] = [dict(p, node=f"n{i // 4}") if p["name"].startswith("b/") else p
                 for i, p in enumerate(s["pods"])]
    e = why(s, "a/want")
    reclaim = next(r for r in e.reasons if r.kind is Kind.RECLAIM)
    assert "queue(s) lab-b with reclaimable: false" in reclaim.message, e.render()
    assert reclaim.data["allowed"] is False
    assert e.reasons[0].kind is Kind.PLACEMENT
    assert f"0 of 4 pods placeable: 2 nodes lack free {GPU}" in e.headline


def test_reclaimable_queue_is_reclaimed_and_the_answer_says_starting() -> None:
    s = scenario(gang("b/hog", 8, "lab-b", running_on="n0"), gang("a/want", 4, "lab-a"),
                 nodes=gpu_nodes(2), queues=[{"name": "lab-a"}, {"name": "lab-b"}])
    s["pods"] = [dict(p, node=f"n{i // 4}") if p["name"].startswith("b/") else p
                 for i, p in enumerate(s["pods"])]
    e = why(s, "a/want")
    assert e.kind is Kind.STARTING, e.render()
    assert "evicted this session" in e.headline


@pytest.mark.parametrize("phase", ["Running"])
def test_running_job(phase: str) -> None:
    s = scenario(gang("u/r", 2, "lab-a", running_on="n0", phase=phase), nodes=gpu_nodes(1),
                 queues=[{"name": "lab-a"}])
    e = why(s, "u/r")
    assert e.kind is Kind.RUNNING
    assert e.headline == "running: 2 of 2 pods scheduled"
    assert e.to_json()["kind"] == "Running"


def test_not_admitted_behind_a_waiting_higher_priority_job() -> None:
    # `hi` is admitted but cannot be placed (its pods select no node), so it keeps its reservation; `lo` waits
    # behind it in the queue's order, and the enqueue numbers say what hi's reservation leaves.
    hi = gang("u/hi", 4, "lab-a", prio="high", nodeSelector={"nope": "x"})
    lo = gang("u/lo", 4, "lab-a", phase="Pending")
    s = scenario(hi, lo, nodes=gpu_nodes(1), queues=[{"name": "lab-a"}],
                 priorityClasses=[{"name": "high", "value": 1000}])
    e = why(s, "u/lo")
    assert e.kind is Kind.ORDER, e.render()
    assert "u/hi goes first (priority 1000 > 0)" in e.headline
    assert f"needs {GPU} 4; queue lab-a may use 0 more" in e.render()


def test_fair_share_while_the_fairer_queue_waits_for_admission() -> None:
    # qa runs 4 of 8 GPUs, qb runs 2 and wants 4 more (not admitted yet); qa's next 2 would fit the free 2, but
    # qa holds its deserved 4 — the answer is computed after the session's actions, before plugins close.
    s = scenario(gang("x/ra", 4, "qa", running_on="n0"), gang("x/rb", 2, "qb", running_on="n1"),
                 gang("x/pb", 4, "qb"), gang("x/pa", 2, "qa"),
                 nodes=gpu_nodes(2), queues=[{"name": "qa"}, {"name": "qb"}])
    s["podgroups"] = [dict(g, phase="Pending") if g["name"] == "x/pb" else g for g in s["podgroups"]]
    result = explain(build_snapshot(documents(s)), CONF)
    e = result["x/pa"]
    assert e.kind is Kind.FAIR_SHARE, e.render()
    assert f"queue qa holds {GPU} 4 of its deserved 4" in e.headline and "qb (share 0.50)" in e.headline
    assert "the cluster has room for 1.6 more (8 × 1.2 overcommit" in result["x/pb"].headline


def test_order_names_the_job_place_and_the_queue_place_with_their_keys() -> None:
    # lab-b (share 0) goes before lab-a (share 1: it runs its deserved 4 GPUs); inside lab-a, a/next waits alone.
    s = scenario(gang("a/run", 4, "lab-a", running_on="n0"), gang("a/next", 4, "lab-a"), gang("b/next", 4, "lab-b"),
                 nodes=gpu_nodes(2), queues=[{"name": "lab-a"}, {"name": "lab-b"}])
    e = why(s, "a/next")
    order = e.reasons[0]
    assert order.kind is Kind.ORDER, e.render()
    assert order.message == (
        "queue lab-a is behind 1 queue(s): lab-b goes first (share 0.00 < 1.00); the job is 1st of the queue's 1 "
        "waiting job(s) (priority 0, DRF dominant share 0.00), and queue lab-a 2nd of 2 queue(s) (priority 0, "
        "share 1.00)")
    data = order.data
    assert (data["position"], data["of"], data["queuePosition"], data["queues"]) == (1, 1, 2, 2)
    assert data["queuesAhead"] == ["lab-b"] and data["queueKey"] == {"priority": 0, "share": 1.0}


def test_order_behind_a_job_also_gives_the_queue_place() -> None:
    s = scenario(gang("u/high", 4, "lab-a", prio="high"), gang("u/low", 4, "lab-a"), gang("b/w", 4, "lab-b"),
                 nodes=gpu_nodes(2), queues=[{"name": "lab-a"}, {"name": "lab-b"}],
                 priorityClasses=[{"name": "high", "value": 100}])
    result = explain(build_snapshot(documents(s)), CONF)
    assert result["u/high"].kind is result["b/w"].kind is Kind.STARTING
    e = result["u/low"]
    assert e.kind is Kind.ORDER, e.render()
    assert e.headline == ("behind 1 job(s) of queue lab-a: u/high goes first (priority 100 > 0); the job is 2nd of "
                          "the queue's 2 waiting job(s) (priority 0, DRF dominant share 0.00), and queue lab-a 1st of "
                          "2 queue(s) (priority 0, share 0.00)")
    data = e.reasons[0].data
    assert (data["position"], data["of"], data["queuePosition"], data["queues"]) == (2, 2, 1, 2)
    assert data["ahead"] == ["u/high"] and data["firstKey"]["priority"] == 100


def test_order_by_drf_dominant_share() -> None:
    # Same priority, same queue: u/a already runs 2 of its 3 pods (dominant share: 2 of 4 GPUs), u/b runs none,
    # so DRF orders u/b first and it takes the last 2 GPUs.
    a, a_pods = gang("u/a", 3, "lab-a", running_on="n0")
    a["phase"] = "Inqueue"
    del a_pods[2]["node"], a_pods[2]["phase"]
    result = explain(build_snapshot(documents(scenario((a, a_pods), gang("u/b", 2, "lab-a"), nodes=gpu_nodes(1),
                                                       queues=[{"name": "lab-a"}]))), CONF)
    assert result["u/b"].kind is Kind.STARTING
    e = result["u/a"]
    assert e.kind is Kind.ORDER, e.render()
    assert "u/b goes first (DRF dominant share 0.00 < 0.50)" in e.headline
    assert "the job is 2nd of the queue's 2 waiting job(s) (priority 0, DRF dominant share 0.50)" in e.headline
    assert e.reasons[0].data["key"]["drf_share"] == 0.5


def _preemption(peer_prio: str | None) -> dict[str, Any]:
    # Two nodes of 4 GPUs, each held by one 4-GPU pod of lab-a; a higher-priority gang of 2 × 4 GPUs arrives.
    return scenario(gang("u/low", 1, "lab-a", gpus=4, running_on="n0"),
                    gang("u/peer", 1, "lab-a", gpus=4, running_on="n1", prio=peer_prio),
                    gang("u/hi", 2, "lab-a", gpus=4, prio="high"), nodes=gpu_nodes(2), queues=[{"name": "lab-a"}],
                    priorityClasses=[{"name": "high", "value": 100}])


def test_preemption_candidates_the_session_does_not_evict() -> None:
    # u/peer has u/hi's priority, so only u/low may be preempted: that frees one node, room for 1 of the 2 pods,
    # and the scheduler (preempting for whole gangs only) evicts nothing.
    snap = build_snapshot(documents(_preemption("high")))
    e = explain(snap, CONF, ["u/hi"])["u/hi"]
    pre = next((r for r in e.reasons if r.kind is Kind.PREEMPT), None)
    assert pre is not None, e.render()
    assert pre.message == ("preemption candidates: 1 pod(s) of lower-priority jobs in queue lab-a, but evicting them "
                           "all frees room for 1 of the 2 pod(s) the gang still needs, and the scheduler preempts "
                           "only for a whole gang")
    assert pre.data == {"candidates": ["u/low-w-0"], "podsAfterEviction": 1, "podsNeeded": 2}
    assert e.kind is Kind.PLACEMENT
    result = run_session(snap, CONF)
    assert not result.evictions and not result.pipelined


def test_preemption_the_session_carries_out_is_starting_soon() -> None:
    e = why(_preemption(None), "u/hi")
    assert e.kind is Kind.STARTING, e.render()
    assert e.headline == "starting soon: 2 pod(s) wait for room being freed (2 pod(s) evicted this session)"
    assert all(r.kind is not Kind.PREEMPT for r in e.reasons)


def test_a_gpu_asked_only_as_a_limit_is_counted_from_the_pods_not_min_resources() -> None:
    """The most common GPU manifest: a Job's pods give nvidia.com/gpu only as a limit, so the job controller's
    minResources (from the template, which the API server does not default) holds no GPU and enqueue admits the gang
    into a queue whose capability is 1 GPU. Its pods (defaulted: request = limit) need 2: it can never run there,
    and the answer says so, whatever minResources says (before, it blamed the fair share)."""
    pg = {"name": "u/a", "queue": "small", "min": 2, "phase": "Inqueue", "minResources": {"pods": "2"}}
    pods = [{"name": f"u/a-w-{i}", "group": "a", "req": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}}
            for i in range(2)]
    s = scenario((pg, pods), nodes=gpu_nodes(2), queues=[{"name": "small", "capability": {GPU: "1"}}])
    e = why(s, "u/a")
    assert e.kind is Kind.UNRESOLVABLE, e.render()
    assert e.headline == ("this gang can never run as its queue is set up (from what its 2 pods ask): needs "
                          "nvidia.com/gpu 2; queue small may never hold more than 1 (its PodGroup's minResources "
                          "counts no nvidia.com/gpu)"), e.render()
    assert e.reasons[0].data["resources"] == {GPU: {"need": 2, "limit": 1}}
    assert e.reasons[0].data["minResourcesMissing"] == [GPU]
    assert len(e.reasons) == 1
    # One pod of 1 GPU of that queue is no such case.
    s = scenario(({**pg, "min": 1}, pods[:1]), nodes=gpu_nodes(2), queues=[{"name": "small", "capability": {GPU: "1"}}])
    assert why(s, "u/a").kind is not Kind.UNRESOLVABLE


# ---- network topology (issue 17) ----------------------------------------------------------------------------------
TOPOLOGY_CONF = parse_scheduler_conf(SHIPPED.read_text() + "  - name: network-topology-aware\n")
LEAVES = {"leaf-a": ["n0", "n1", "n2", "n3"], "leaf-b": ["n4", "n5", "n6", "n7"]}


def topology_scenario(size: int, gpus: int, topology: dict[str, Any], busy: int = 0) -> dict[str, Any]:
    pg, pods = gang("ml/big", size, "default", gpus=gpus)
    pg["networkTopology"] = topology
    filler, running = gang("ml/filler", busy, "default", gpus=4, running_on="n4") if busy else ({}, [])
    hypernodes = [{"name": leaf, "tier": 1, "nodes": nodes} for leaf, nodes in LEAVES.items()]
    hypernodes.append({"name": "spine", "tier": 2, "hypernodes": list(LEAVES)})
    gangs = [(pg, pods)] + ([(filler, running)] if busy else [])
    return scenario(*gangs, nodes=gpu_nodes(8), hypernodes=hypernodes, queues=[{"name": "default"}])


def why_topology(s: dict[str, Any], key: str) -> Any:
    return explain(build_snapshot(documents(s)), TOPOLOGY_CONF, [key])[key]


def test_topology_names_the_scarce_resource_and_the_best_hypernode() -> None:
    # 5 pods of 4 GPUs: 20 GPUs, a leaf has 16 (leaf-b only 12: one node is busy) — the cluster has room, no leaf has.
    s = topology_scenario(5, 4, {"mode": "hard", "highestTierAllowed": 1}, busy=1)
    assert run_session(build_snapshot(documents(s)), TOPOLOGY_CONF).binds == {}
    answer = why_topology(s, "ml/big")
    reasons = {r.kind: r for r in answer.reasons}
    assert reasons[Kind.TOPOLOGY].message == ("no HyperNode of tier ≤ 1 has 20 free nvidia.com/gpu "
                                              "(best: leaf-a with 16)")
    assert reasons[Kind.TOPOLOGY].data == {"tier": 1, "pods": 5, "hypernodes": 2, "resource": GPU, "need": 20,
                                           "best": "leaf-a", "bestFree": 16}
    assert Kind.PLACEMENT not in reasons  # the cluster-wide fit says nothing to this gang


def test_topology_by_tier_name_and_pods_that_fit() -> None:
    # 16 GPUs free in leaf-a in sum, but a pod asks 5 of a node's 4: no room for any pod anywhere.
    s = topology_scenario(3, 5, {"mode": "hard", "highestTierAllowed": 1})
    answer = why_topology(s, "ml/big")
    assert Kind.UNRESOLVABLE in {r.kind for r in answer.reasons}  # what no tier could fix comes first
    s = topology_scenario(5, 3, {"mode": "hard", "highestTierAllowed": 1})
    message = {r.kind: r.message for r in why_topology(s, "ml/big").reasons}[Kind.TOPOLOGY]
    assert message == "no HyperNode of tier ≤ 1 has room for 5 pods as they ask (best: leaf-a, room for 4)"


def test_topology_is_no_reason_when_a_tier_fits_or_soft_or_without_the_plugin() -> None:
    fits = topology_scenario(4, 4, {"mode": "hard", "highestTierAllowed": 1})
    assert Kind.TOPOLOGY not in {r.kind for r in why_topology(fits, "ml/big").reasons}
    soft = topology_scenario(5, 4, {"mode": "soft"})
    assert Kind.TOPOLOGY not in {r.kind for r in why_topology(soft, "ml/big").reasons}
    hard = topology_scenario(5, 4, {"mode": "hard", "highestTierAllowed": 1})
    assert Kind.TOPOLOGY not in {r.kind for r in why(hard, "ml/big").reasons}  # shipped conf: placed anywhere


def test_topology_tree_that_cannot_be_used() -> None:
    s = topology_scenario(2, 4, {"mode": "hard", "highestTierAllowed": 1})
    s["hypernodes"].append({"name": "spine-2", "tier": 2, "hypernodes": ["leaf-a"]})  # leaf-a with two parents
    reasons = why_topology(s, "ml/big").reasons
    assert reasons[0].kind is Kind.TOPOLOGY
    assert reasons[0].message == ("the HyperNode tree cannot be used, so jobs with a network topology wait: HyperNode "
                                  "leaf-a is a member of more than one HyperNode: spine and spine-2")


ONE_PER_NODE = {"labels": {"app": "trainer"}, "affinity": {"podAntiAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}]}}}


def test_one_worker_per_node_on_too_few_nodes_names_the_anti_affinity() -> None:
    nodes = [dict(n, labels={"kubernetes.io/hostname": n["name"]}) for n in gpu_nodes(3)]
    s = scenario(gang("u/ddp", 4, "lab-a", **ONE_PER_NODE), nodes=nodes, queues=[{"name": "lab-a"}])
    e = why(s, "u/ddp")
    assert e.kind is Kind.UNRESOLVABLE, e.render()
    assert "3 of 4 pods placeable: 3 nodes didn't match pod anti-affinity rules" in e.headline, e.render()
    assert run_session(build_snapshot(documents(s)), CONF).binds == {}


def test_a_spread_the_zones_cannot_hold_names_the_constraint() -> None:
    spread = {"labels": {"app": "web"}, "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
         "labelSelector": {"matchLabels": {"app": "web"}}}]}
    nodes = [dict(n, labels={"zone": f"z{i % 2}"}) for i, n in enumerate(gpu_nodes(4))]
    s = scenario(gang("u/web", 4, "lab-a", **spread), nodes=nodes, queues=[{"name": "lab-a"}])
    e = why(s, "u/web")
    assert "2 of 4 pods placeable: 4 nodes didn't match pod topology spread constraints" in e.headline, e.render()


def test_a_pod_no_card_has_room_for_names_the_card_that_comes_closest() -> None:
    """vGPU (issue 18): two nodes whose 80 GB cards hold running pods; a 20 GB ask fits no card. The answer names
    the card with the most memory free among all nodes (and the nodes), with the shipped conf plus deviceshare."""
    conf = parse_scheduler_conf((SHIPPED.parents[2] / "examples" / "scheduler-conf-vgpu.yaml").read_text())

    def node(name: str) -> dict[str, Any]:
        register = "".join(f"{name}-gpu{c},10,81920,NVIDIA-A100-SXM4-80GB,true,hami-core:" for c in range(2))
        return {"name": name, "annotations": {"volcano.sh/node-vgpu-register": register},
                "alloc": {"cpu": "16", "memory": "64Gi", "volcano.sh/vgpu-number": "20",
                          "volcano.sh/vgpu-memory": "1000000", "volcano.sh/vgpu-cores": "200"}}

    def running(name: str, on: str, card: int, memory: int) -> dict[str, Any]:
        return {"name": f"u/{name}", "group": name, "node": on, "phase": "Running",
                "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": str(memory)},
                "annotations": {"volcano.sh/vgpu-ids-new": f"{on}-gpu{card},NVIDIA,{memory},0:",
                                "volcano.sh/vgpu-node": on}}

    held = [("a", "n0", 0, 71680), ("b", "n0", 1, 69632), ("c", "n1", 0, 81920), ("d", "n1", 1, 75000)]
    s = {"nodes": [node("n0"), node("n1")], "queues": [{"name": "lab-a"}],
         "podgroups": [{"name": f"u/{n}", "queue": "lab-a", "min": 1, "phase": "Running"} for n, *_ in held]
         + [{"name": "u/new", "queue": "lab-a", "min": 1, "phase": "Inqueue"}],
         "pods": [running(*h) for h in held]
         + [{"name": "u/new", "group": "new", "limits": {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "20480"}}]}
    e = explain(build_snapshot(documents(s)), conf, ["u/new"], None)["u/new"]
    assert "no card with 20 GB free: best n0 card 1 with 12 GB" in e.render(), e.render()
    assert "2 nodes had no vGPU card with room for the pod" in e.render(), e.render()
    decided = run_session(build_snapshot(documents(s)), conf)
    assert "u/new" not in decided.binds
    assert decided.cards["n0"] == (("n0-gpu0", 71680, 81920, 1, 10), ("n0-gpu1", 69632, 81920, 1, 10))
