"""`lapilli job why` on the real control plane (issue 14's "done means"): one job per reason — closed queue, over
capability, behind a higher-priority job, behind a fairer queue, a gang larger than any placement, a node taint,
reclaim not allowed — where the answer names that reason with the right numbers, then says Running once the cause
is removed (and the scheduler does run it). Each test has its own nodes offering `example.com/slot`, a resource
no other node has, so the numbers are the test's own."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from assembly.dev import DevCluster
from assembly.why.gather import CONF_ENV
from lapilli.kube import KubeClient
from lapilli.kube.errors import AlreadyExists
from lapilli.kube.resources import (
    NODES,
    PODGROUPS,
    PODS,
    PRIORITY_CLASSES,
    QUEUES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    VC_JOBS,
)
from tests.e2e.extender_helpers import GROUP, Pool, eventually, open_pool
from tests.e2e.test_controller_helpers import lapilli, remove_job
from tests.e2e.test_kube_credentials import _with_user

SLOT = "example.com/slot"
ONE = {"cpu": "1", SLOT: "1"}


@pytest.fixture
async def pool(control_plane: DevCluster, request: pytest.FixtureRequest) -> AsyncIterator[Pool]:
    async with open_pool(control_plane, request.node.name) as p:
        yield p


def api(pool: Pool) -> KubeClient:
    assert pool.cluster.client is not None
    return pool.cluster.client


async def make_queue(pool: Pool, suffix: str, **spec: Any) -> str:
    name = f"{pool.name}-{suffix}"[:60]
    await api(pool).create(QUEUES, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                                    "metadata": {"name": name}, "spec": {"weight": 1, **spec}})
    pool.queues.append(name)
    await eventually(lambda: _queue_state(pool, name, "Open"), 20)
    return name


async def _queue_state(pool: Pool, name: str, state: str) -> bool:
    return ((await api(pool).get(QUEUES, name)).get("status") or {}).get("state") == state


async def gang(pool: Pool, name: str, size: int, queue: str, request: dict[str, str], *, min_member: int | None = None,
               min_resources: bool | dict[str, str] = True, priority_class: str = "", **pod_extra: Any) -> list[str]:
    """A bare PodGroup (as operators make them) with `minResources` (default: the members' requests), and its
    pods."""
    need = size if min_member is None else min_member
    spec: dict[str, Any] = {"minMember": need, "queue": queue}
    if isinstance(min_resources, dict):
        spec["minResources"] = min_resources
    elif min_resources:
        spec["minResources"] = {k: str(int(v) * need) for k, v in request.items()}
    if priority_class:
        spec["priorityClassName"] = priority_class
        pod_extra["priorityClassName"] = priority_class
    await api(pool).create(PODGROUPS, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                                       "metadata": {"name": name, "namespace": pool.namespace}, "spec": spec},
                           pool.namespace)
    pool.podgroups.append(name)
    pods = []
    for i in range(size):
        pod_name = f"{name}-w-{i}"
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod_name, "namespace": pool.namespace, "annotations": {GROUP: name}},
                "spec": pool.pod_spec(request, **pod_extra)}
        if "nodeSelector" in pod_extra:
            body["spec"]["nodeSelector"] = {**pool.pod_spec(request)["nodeSelector"], **pod_extra["nodeSelector"]}
        await api(pool).create(PODS, body, pool.namespace)
        pool.pods.append(pod_name)
        pods.append(pod_name)
    return pods


async def remove_gang(pool: Pool, name: str) -> None:
    for pod in [p for p in pool.pods if p.startswith(f"{name}-w-")]:
        await api(pool).delete(PODS, pod, pool.namespace, grace_period_seconds=0)
    await api(pool).delete(PODGROUPS, name, pool.namespace)


async def phase(pool: Pool, podgroup: str) -> str:
    pg = await api(pool).get(PODGROUPS, podgroup, pool.namespace)
    return str((pg.get("status") or {}).get("phase") or "")


async def running(pool: Pool, podgroup: str, timeout_s: float = 90) -> None:
    try:
        await eventually(lambda: _phase_is(pool, podgroup, "Running"), timeout_s)
    except AssertionError:
        raise AssertionError(f"PodGroup {podgroup} is {await phase(pool, podgroup)!r}, not Running") from None


def why(pool: Pool, *target: str) -> dict[str, Any]:
    done = lapilli(pool.cluster, "job", "why", "-n", pool.namespace, *target, "-o", "json")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


async def answer(pool: Pool, *target: str, kind: str, timeout_s: float = 60) -> dict[str, Any]:
    """The first answer whose headline kind is `kind` (the scheduler may need a session or two to get there)."""
    last: dict[str, Any] = {}

    async def check() -> dict[str, Any] | None:
        nonlocal last
        last = why(pool, *target)
        return last if last["kind"] == kind else None

    try:
        return await eventually(check, timeout_s, every_s=1.0)  # type: ignore[no-any-return]
    except AssertionError:
        raise AssertionError(f"no {kind} answer; last: {json.dumps(last, indent=1)}") from None


async def runs_and_says_so(pool: Pool, *target: str, podgroup: str) -> None:
    await running(pool, podgroup)
    final = await answer(pool, *target, kind="Running")
    assert final["headline"].startswith("running: ")


def _reason(result: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [r for r in result["reasons"] if r["kind"] == kind]
    assert found, result
    return found[0]


async def test_closed_queue(pool: Pool) -> None:
    await pool.add_nodes(1, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "q")
    # minResources above the cluster for now, so it stays Pending until the queue is closed; then a fitting one.
    await gang(pool, "held", 2, queue, ONE, min_resources={"cpu": "2", SLOT: "64"})
    assert lapilli(pool.cluster, "queue", "operate", "-n", queue, "-a", "close").returncode == 0
    await eventually(lambda: _queue_state(pool, queue, "Closing"), 30)
    await api(pool).patch(PODGROUPS, "held", {"spec": {"minResources": {"cpu": "2", SLOT: "2"}}}, pool.namespace)
    result = await answer(pool, "--podgroup", "held", kind="QueueClosed")
    assert f"queue {queue} is Closing (closed by a CloseQueue Command at " in result["headline"]
    assert result["phase"] == "Pending" and await phase(pool, "held") in ("", "Pending")
    assert lapilli(pool.cluster, "queue", "operate", "-n", queue, "-a", "open").returncode == 0
    await runs_and_says_so(pool, "--podgroup", "held", podgroup="held")


async def test_a_job_asking_its_resource_only_as_a_limit_can_never_run_in_a_small_queue(pool: Pool) -> None:
    """The most common GPU manifest gives the GPU as a limit only. The job controller's minResources (from the
    template, which the API server does not default) holds none, so enqueue admits the gang into a queue of
    capability 1 while its pods (defaulted: request = limit) need 2: the answer is that it can never run there."""
    await pool.add_nodes(1, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "q", capability={SLOT: "1"})
    spec = pool.pod_spec({"cpu": "100m"})
    spec["containers"][0]["resources"]["limits"] = {SLOT: "1"}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "limits", "namespace": pool.namespace},
           "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": 2,
                    "tasks": [{"name": "w", "replicas": 2, "template": {"spec": spec}}]}}
    await api(pool).create(VC_JOBS, job, pool.namespace)
    try:
        result = await answer(pool, "limits", kind="Unresolvable")
        assert (f"needs {SLOT} 2; queue {queue} may never hold more than 1 (its PodGroup's minResources counts no "
                f"{SLOT})") in result["headline"], result
        await api(pool).patch(QUEUES, queue, {"spec": {"capability": {SLOT: "2"}}})
        podgroup = result["podgroup"].split("/", 1)[1]
        await runs_and_says_so(pool, "limits", podgroup=podgroup)
    finally:
        await remove_job(api(pool), pool.namespace, "limits")


async def test_over_capability_for_a_volcano_job(pool: Pool) -> None:
    await pool.add_nodes(2, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "q", capability={SLOT: "4"})
    await gang(pool, "hold", 2, queue, ONE)
    await running(pool, "hold")
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": "train", "namespace": pool.namespace},
           "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": 4,
                    "tasks": [{"name": "w", "replicas": 4, "template": {"spec": pool.pod_spec(ONE)}}]}}
    await api(pool).create(VC_JOBS, job, pool.namespace)
    try:
        result = await answer(pool, "train", kind="OverCapability")
        assert f"needs {SLOT} 4; queue {queue} may use 2 more of its capability 4" in result["headline"]
        numbers = _reason(result, "OverCapability")["data"]["resources"][SLOT]
        assert (numbers["need"], numbers["room"], numbers["limit"], numbers["allocated"]) == (4, 2, 4, 2)
        podgroup = result["podgroup"].split("/", 1)[1]
        assert await phase(pool, podgroup) in ("", "Pending")

        async def described() -> dict[str, Any] | None:  # what `kubectl describe pg` shows
            pg = await api(pool).get(PODGROUPS, podgroup, pool.namespace)
            return next((c for c in (pg.get("status") or {}).get("conditions") or []
                         if c.get("type") == "lapilli.io/Why" and c.get("reason") == "OverCapability"), None)

        cond = await eventually(described, 90)  # the leader explains every --why-interval (30 s)
        assert cond["status"] == "True" and "may use 2 more of its capability 4" in cond["message"]
        await api(pool).patch(QUEUES, queue, {"spec": {"capability": {SLOT: "8"}}})
        await runs_and_says_so(pool, "train", podgroup=podgroup)
    finally:
        await remove_job(api(pool), pool.namespace, "train")


async def test_behind_a_higher_priority_job(pool: Pool) -> None:
    await pool.add_nodes(1, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "q")
    high = f"{pool.name}-high"
    await api(pool).create(PRIORITY_CLASSES, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                              "metadata": {"name": high}, "value": 1000})
    pool.classes.append(high)
    # `hi` is admitted first and keeps its reservation, but its pods want a node that does not exist.
    await gang(pool, "hi", 4, queue, ONE, priority_class=high, nodeSelector={"lapilli.io/none": "x"})
    await eventually(lambda: _phase_is(pool, "hi", "Inqueue"), 30)
    await gang(pool, "lo", 4, queue, ONE)
    result = await answer(pool, "--podgroup", "lo", kind="Order")
    assert f"{pool.namespace}/hi goes first (priority 1000 > 0)" in result["headline"]
    assert _reason(result, "Order")["data"]["position"] == 2
    assert f"needs {SLOT} 4" in json.dumps(result["reasons"])
    await remove_gang(pool, "hi")
    await runs_and_says_so(pool, "--podgroup", "lo", podgroup="lo")


async def _phase_is(pool: Pool, podgroup: str, want: str) -> bool:
    return await phase(pool, podgroup) == want


async def test_behind_a_fairer_queue(pool: Pool) -> None:
    await pool.add_nodes(2, gpus=0, extra={SLOT: "4"})
    qa, qb = await make_queue(pool, "a"), await make_queue(pool, "b")
    await gang(pool, "ra", 4, qa, ONE)
    await running(pool, "ra")
    await gang(pool, "rb", 2, qb, ONE)
    await running(pool, "rb")
    await gang(pool, "pb", 4, qb, ONE)  # qb's demand: 6 of the 8 slots, as qa's
    await gang(pool, "pa", 2, qa, ONE)  # fits the 2 free slots, but qa holds its deserved 4
    result = await answer(pool, "--podgroup", "pa", kind="FairShare")
    assert f"queue {qa} holds {SLOT} 4 of its deserved 4" in result["headline"]
    assert f"{qb} (share 0.50)" in result["headline"]
    await remove_gang(pool, "pb")
    await runs_and_says_so(pool, "--podgroup", "pa", podgroup="pa")


async def test_gang_larger_than_any_placement(pool: Pool) -> None:
    await pool.add_nodes(2, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "q")
    await gang(pool, "big", 3, queue, {"cpu": "1", SLOT: "5"}, min_resources=False)
    result = await answer(pool, "--podgroup", "big", kind="Unresolvable")
    assert "nothing in the cluster can ever fit this gang" in result["headline"]
    assert "0 of 3 pods placeable: " in result["headline"]
    assert f"2 nodes are too small for {SLOT} (need 5, have 4)" in result["headline"]
    await pool.add_nodes(1, gpus=0, extra={SLOT: "16"})
    await runs_and_says_so(pool, "--podgroup", "big", podgroup="big")


async def test_node_taint(pool: Pool) -> None:
    nodes = await pool.add_nodes(2, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "q")
    own = {"key": "lapilli.io/pool", "value": pool.name, "effect": "NoSchedule"}
    dedicated = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    for node in nodes:
        await api(pool).patch(NODES, node, {"spec": {"taints": [own, dedicated]}})
    await gang(pool, "t", 2, queue, {"cpu": "1", SLOT: "2"}, min_resources=False)
    result = await answer(pool, "--podgroup", "t", kind="Unresolvable")
    assert "2 nodes are tainted dedicated=infer:NoSchedule" in result["headline"]
    assert await phase(pool, "t") == "Inqueue"
    for node in nodes:
        await api(pool).patch(NODES, node, {"spec": {"taints": [own]}})
    await runs_and_says_so(pool, "--podgroup", "t", podgroup="t")


async def test_reclaim_not_allowed(pool: Pool) -> None:
    await pool.add_nodes(2, gpus=0, extra={SLOT: "4"})
    qa, qb = await make_queue(pool, "a"), await make_queue(pool, "b", reclaimable=False)
    await gang(pool, "hog", 8, qb, ONE, min_member=4, min_resources=False)
    await running(pool, "hog")
    await eventually(lambda: _all_bound(pool, "hog", 8), 60)
    await gang(pool, "want", 4, qa, ONE, min_resources=False)
    result = await answer(pool, "--podgroup", "want", kind="Placement")
    assert result["headline"].startswith("0 of 4 pods placeable: ")
    assert f"2 nodes lack free {SLOT} (need 1, free 0)" in result["headline"]
    reclaim = _reason(result, "Reclaim")
    assert reclaim["data"]["allowed"] is False
    assert f"the room is held by queue(s) {qb} with reclaimable: false" in reclaim["message"]
    before = await _reclaimed(pool, qb)
    await api(pool).patch(QUEUES, qb, {"spec": {"reclaimable": True}})
    await runs_and_says_so(pool, "--podgroup", "want", podgroup="want")
    assert await _reclaimed(pool, qb) >= before + 4


async def _all_bound(pool: Pool, name: str, n: int) -> bool:
    pods = [p for p in pool.pods if p.startswith(f"{name}-w-")]
    return len(await pool.placed(pods)) >= n


async def _reclaimed(pool: Pool, queue: str) -> float:
    """`lapilli_evictions_by_action_total{action, queue}` from the service's /metrics, for reclaim and gangreclaim
    (the shipped conf's)."""
    import aiohttp

    assert pool.cluster.info is not None
    port = pool.cluster.info.ports["lapilli-webhook"]
    async with aiohttp.ClientSession() as http, http.get(f"https://127.0.0.1:{port}/metrics", ssl=False) as resp:
        text = await resp.text()
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "lapilli_evictions_by_action_total" and s.labels.get("queue") == queue
               and s.labels.get("action") in ("reclaim", "gangreclaim"))


async def _researcher(pool: Pool, directory: Path) -> Path:
    """A kubeconfig for a ServiceAccount of the test's namespace with a namespaced Role only (read its Pods,
    PodGroups and Jobs), as a researcher's account often is: no Nodes, Queues, other namespaces or the conf."""
    name = "researcher"
    with contextlib.suppress(AlreadyExists):  # the namespace outlives a run
        await api(pool).create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                                  "metadata": {"name": name}}, pool.namespace)
        await api(pool).create(ROLES, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                      {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": ["get", "list"]},
                      {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["get", "list"]}]},
            pool.namespace)
        await api(pool).create(ROLE_BINDINGS, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": pool.namespace}]}, pool.namespace)
    issued = await api(pool).request(
        "POST", SERVICE_ACCOUNTS.path(pool.namespace, name, "token"),
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    return _with_user(pool.cluster, directory / "kubeconfig", {"token": issued["status"]["token"]})


async def test_restricted_account_gets_a_partial_answer_and_the_schedulers_condition(pool: Pool,
                                                                                      tmp_path: Path) -> None:
    await pool.add_nodes(1, gpus=0, extra={SLOT: "4"})
    queue = await make_queue(pool, "q", capability={SLOT: "2"})
    await gang(pool, "wide", 4, queue, ONE)

    async def described() -> dict[str, Any] | None:  # the service's condition, written with its full view
        pg = await api(pool).get(PODGROUPS, "wide", pool.namespace)
        return next((c for c in (pg.get("status") or {}).get("conditions") or []
                     if c.get("type") == "lapilli.io/Why" and c.get("status") == "True"), None)

    written = await eventually(described, 90)  # the leader explains every --why-interval (30 s)
    kubeconfig = await _researcher(pool, tmp_path)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    env.pop(CONF_ENV, None)
    argv = [str(Path(sys.executable).with_name("lapilli")), "job", "why", "-n", pool.namespace, "--podgroup", "wide"]
    done = subprocess.run([*argv, "-o", "json"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["partial"] is True
    gaps = {(u["kind"], u["scope"]): u["status"] for u in result["unreadable"]}
    assert gaps[("Node", "cluster")] == 403 and gaps[("Queue", "cluster")] == 403
    assert gaps[("PodGroup", f"namespaces other than {pool.namespace}")] == 403
    assert gaps[("ConfigMap", "lapilli-system/lapilli-scheduler-conf")] == 403  # the conf is a fallback, and says so
    cond = result["scheduler_condition"]
    assert (cond["reason"], cond["message"]) == (written["reason"], written["message"])
    assert f"needs {SLOT} 4" in cond["message"] and f"queue {queue}" in cond["message"]
    text = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert text.returncode == 0, text.stderr
    assert "PARTIAL ANSWER: your credentials could not read " in text.stdout
    assert "Node (cluster): 403 Forbidden" in text.stdout
    assert "the scheduler's own answer (condition lapilli.io/Why of " in text.stdout
    assert f"): {written['reason']}: {written['message']}\n" in text.stdout
