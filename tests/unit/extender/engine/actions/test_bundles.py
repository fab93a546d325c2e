"""Victim bundles and their order (extender/engine/actions/bundles.py).

Ports of Volcano's pkg/scheduler/actions/utils/bundle_test.go, each test naming its Go test; the Go tests build
JobInfo/TaskInfo by hand, here the jobs come from a session over the same pods (1 CPU each; the sub-job rows' sub-jobs
from a PodGroup subGroupPolicy over a `part` label). Left out: TestSelectBundles_*: Lapilli selects bundles in
`gang_evict.evict_for_gang` (its rows are the scenario rows). Then the order upstream's workload-aware preemption
(KEP-5710) gives victims of equal kind and priority, and what makes a bundle whole.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from extender.engine.actions.bundles import (
    Bundle,
    BundleKind,
    allowed_bundles,
    efficiency,
    job_bundles,
    sort_for_preempt,
    sort_for_reclaim,
)
from extender.engine.conf import parse_conf
from extender.engine.model import Job, Task
from extender.engine.run import open_session, registry
from extender.engine.session import Session
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.builders import documents

CONF = {"actions": "allocate", "tiers": [{"plugins": [{"name": "priority"}, {"name": "gang"}]}]}
NODES = [{"name": "n1", "alloc": {"cpu": "64", "memory": "64Gi", "pods": "100"}},
         {"name": "n2", "alloc": {"cpu": "64", "memory": "64Gi", "pods": "100"}}]


def session(groups: list[dict[str, Any]], pods: list[dict[str, Any]]) -> Session:
    scenario = {"nodes": NODES, "queues": [{"name": "qa"}, {"name": "qb"}, {"name": "default"}],
                "priorityClasses": [{"name": f"p{v}", "value": v} for v in (1, 10, 50)],
                "podgroups": groups, "pods": pods}
    return open_session(build_snapshot(documents(scenario)), parse_conf(CONF, registry()))


def running(job: str, count: int, *, node: str = "n1", role: str | None = None, start: int = 0,
            **extra: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(start, start + count):
        pod = {"name": f"ns/{job}-w-{i}", "group": job, "req": {"cpu": "1"}, "node": node, "phase": "Running", **extra}
        if role is not None:
            pod["role"] = role
        out.append(pod)
    return out


def members(job: Job) -> list[Task]:
    return sorted(job.tasks.values(), key=lambda t: t.uid)


def cpu(ssn: Session, cores: float) -> np.ndarray:
    need = ssn.dims.zeros()
    need[ssn.dims.index["cpu"]] = cores * 1000
    return need


def names(bundles: list[Bundle]) -> list[str]:
    return [b.tasks[0].name for b in bundles]


LOCAL = frozenset({"n1", "n2"})


def test_volcano_create_job_bundles_safe_and_whole() -> None:
    # TestCreateJobBundles_SafeAndWhole: minAvailable 3, role worker 3, five running: 2 surplus; Volcano's whole
    # bundle holds the other 3, Lapilli's the whole gang of 5 (taking 3 and giving the 2 back would leave it short).
    ssn = session([{"name": "ns/j", "min": 3, "minTaskMember": {"worker": 3}, "phase": "Running"}],
                  running("j", 5, role="worker"))
    job = ssn.jobs["ns/j"]
    bundles = job_bundles(job, members(job), LOCAL, ssn.dims.zeros())
    assert [(b.kind, len(b.tasks)) for b in bundles] == [(BundleKind.SURPLUS, 2), (BundleKind.WHOLE, 5)]


def test_volcano_create_job_bundles_job_not_ready_short_circuits_all_safe() -> None:
    # TestCreateJobBundles_JobNotReadyShortCircuitsAllSafe: a job already below minAvailable costs no gang.
    ssn = session([{"name": "ns/j", "min": 3, "phase": "Running"}], running("j", 2))
    job = ssn.jobs["ns/j"]
    [bundle] = job_bundles(job, members(job), LOCAL, ssn.dims.zeros())
    assert (bundle.kind, len(bundle.tasks), bundle.cost) == (BundleKind.SURPLUS, 2, None)


def test_volcano_create_job_bundles_no_task_min_available_treats_roles_as_unconstrained() -> None:
    # TestCreateJobBundles_NoTaskMinAvailableTreatsAllRolesAsUnconstrained: surplus by minAvailable alone.
    ssn = session([{"name": "ns/j", "min": 2, "phase": "Running"}],
                  running("j", 2, role="ps") + running("j", 2, role="worker", start=2))
    job = ssn.jobs["ns/j"]
    bundles = job_bundles(job, members(job), LOCAL, ssn.dims.zeros())
    assert [(b.kind, len(b.tasks)) for b in bundles] == [(BundleKind.SURPLUS, 2), (BundleKind.WHOLE, 4)]


def test_role_minimum_keeps_a_role_whole_even_with_job_surplus() -> None:
    # The role check of CreateJobBundles: ps has no member to spare, so only workers are surplus.
    ssn = session([{"name": "ns/j", "min": 3, "minTaskMember": {"ps": 2, "worker": 1}, "phase": "Running"}],
                  running("j", 2, role="ps") + running("j", 3, role="worker", start=2))
    job = ssn.jobs["ns/j"]
    surplus, whole = job_bundles(job, members(job), LOCAL, ssn.dims.zeros())
    assert {t.role for t in surplus.tasks} == {"worker"} and len(surplus.tasks) == 2
    assert len(whole.tasks) == 5


def _parts(job: str, parts: dict[str, list[str]], node_of: dict[str, str], roles: dict[str, str] | None = None,
           ) -> list[dict[str, Any]]:
    """Running pods of `job`, each labelled with its sub-job (`part`), on the node `node_of` gives (default n1)."""
    return [{"name": f"ns/{job}-{pod}", "group": job, "req": {"cpu": "1"}, "node": node_of.get(pod, "n1"),
             "phase": "Running", "labels": {"part": part}, **({"role": roles[pod]} if roles and pod in roles else {})}
            for part, pods in parts.items() for pod in pods]


def _policy(name: str, size: int, min_groups: int, role: str | None = None) -> dict[str, Any]:
    policy: dict[str, Any] = {"name": name, "subGroupSize": size, "minSubGroups": min_groups, "matchLabelKeys": ["part"]}
    if role is not None:
        policy["labelSelector"] = {"matchLabels": {"volcano.sh/task-spec": role}}
    return policy


N1: Final = frozenset({"n1"})  # the domain: the sub-job rows' local tasks are on n1, the rest on n2


def _tasks(bundle: Bundle) -> list[str]:
    return [t.name.split("-", 1)[1] for t in bundle.tasks]


def test_volcano_create_job_bundles_sub_job_group_slack_caps_safe() -> None:
    # TestCreateJobBundles_SubJobGroupSlackCapsSafe: minAvailable 4, three sub-jobs of 2 in a group that needs 2 of
    # them; the job could lose 2 pods, the group only one ready sub-job: t1a alone is surplus (t2a too would break a
    # second sub-job and the gang). Lapilli's whole bundle is the whole gang.
    ssn = session([{"name": "ns/j", "min": 4, "phase": "Running", "subGroupPolicy": [_policy("g", 2, 2)]}],
                  _parts("j", {"1": ["t1a", "t1b"], "2": ["t2a", "t2b"], "3": ["t3a", "t3b"]},
                         {"t1b": "n2", "t2b": "n2", "t3b": "n2"}))
    job = ssn.jobs["ns/j"]
    surplus, whole = job_bundles(job, members(job), N1, ssn.dims.zeros())
    assert (surplus.kind, _tasks(surplus)) == (BundleKind.SURPLUS, ["t1a"])
    assert whole.kind is BundleKind.WHOLE and len(whole.tasks) == 6


def test_volcano_create_job_bundles_mixed_legacy_and_sub_job_both_enforced() -> None:
    # TestCreateJobBundles_MixedLegacyAndSubJobBothEnforced: masters (no role minimum) in a group needing 1 of its 2
    # sub-jobs, workers (role minimum 5 of 5) in a group needing 2 of 3, sub-job w1 already short: m1 is surplus on
    # the master group's slack, w1a is refused by the role check alone.
    ssn = session([{"name": "ns/j", "min": 5, "phase": "Running", "minTaskMember": {"worker": 5},
                    "subGroupPolicy": [_policy("m", 1, 1, "master"), _policy("w", 2, 2, "worker")]}],
                  _parts("j", {"m1": ["m1"], "m2": ["m2"], "w1": ["w1a"], "w2": ["w2a", "w2b"], "w3": ["w3a", "w3b"]},
                         {"m2": "n2", "w2a": "n2", "w2b": "n2", "w3a": "n2", "w3b": "n2"},
                         {"m1": "master", "m2": "master", "w1a": "worker", "w2a": "worker", "w2b": "worker",
                          "w3a": "worker", "w3b": "worker"}))
    job = ssn.jobs["ns/j"]
    surplus, whole = job_bundles(job, members(job), N1, ssn.dims.zeros())
    assert (surplus.kind, _tasks(surplus)) == (BundleKind.SURPLUS, ["m1"])
    assert whole.kind is BundleKind.WHOLE and len(whole.tasks) == 7


def test_volcano_create_job_bundles_already_broken_sub_job_is_subject_to_further_eviction() -> None:
    # TestCreateJobBundles_AlreadyBrokenSubJobIsSubjectToFurtherEviction: sub-job 1 is already short (1 of 2), the
    # group has no ready sub-job to spare: sj1a goes as surplus (it breaks nothing more), sj2a and sj3a do not.
    ssn = session([{"name": "ns/j", "min": 3, "phase": "Running", "subGroupPolicy": [_policy("g", 2, 2)]}],
                  _parts("j", {"1": ["sj1a"], "2": ["sj2a", "sj2b"], "3": ["sj3a", "sj3b"]},
                         {"sj2b": "n2", "sj3b": "n2"}))
    job = ssn.jobs["ns/j"]
    surplus, whole = job_bundles(job, members(job), N1, ssn.dims.zeros())
    assert (surplus.kind, _tasks(surplus)) == (BundleKind.SURPLUS, ["sj1a"])
    assert whole.kind is BundleKind.WHOLE and len(whole.tasks) == 5


def test_volcano_apply_allowed_tasks_whole_atomic_and_safe_shrink() -> None:
    # TestApplyAllowedTasks_WholeAtomicAndSafeShrink: a whole bundle with a refused member is dropped, a safe one
    # shrinks to what is allowed.
    ssn = session([{"name": "ns/j", "min": 1, "phase": "Running"}], running("j", 3))
    t1, t2, t3 = members(ssn.jobs["ns/j"])
    zeros = ssn.dims.zeros()
    bundles = [Bundle(BundleKind.SURPLUS, ssn.jobs["ns/j"], [t1, t2], cpu(ssn, 2), None),
               Bundle(BundleKind.WHOLE, ssn.jobs["ns/j"], [t3], cpu(ssn, 1), cpu(ssn, 3))]
    [kept] = allowed_bundles(bundles, {t1.uid, "t3x"}, zeros, LOCAL)
    assert kept.kind is BundleKind.SURPLUS and kept.tasks == [t1]
    assert kept.local[ssn.dims.index["cpu"]] == 1000


def _whole(ssn: Session, job: str, local: float, cost: float) -> Bundle:
    task = members(ssn.jobs[job])[0]
    return Bundle(BundleKind.WHOLE, ssn.jobs[job], [task], cpu(ssn, local), cpu(ssn, cost))


def test_volcano_sort_bundles_for_preempt_type_priority_and_roi() -> None:
    # TestSortBundlesForPreempt_TypePriorityAndROI: the safe bundle (of the higher-priority job) first, then the
    # whole bundle that frees more per unit of its gang.
    ssn = session([{"name": "ns/lo1", "min": 1, "phase": "Running", "priorityClassName": "p1"},
                   {"name": "ns/lo2", "min": 1, "phase": "Running", "priorityClassName": "p1"},
                   {"name": "ns/hi", "min": 1, "phase": "Running", "priorityClassName": "p10"}],
                  running("lo1", 1, priorityClassName="p1") + running("lo2", 1, priorityClassName="p1")
                  + running("hi", 1, priorityClassName="p10"))
    safe = Bundle(BundleKind.SURPLUS, ssn.jobs["ns/hi"], members(ssn.jobs["ns/hi"]), cpu(ssn, 1), None)
    low_roi, high_roi = _whole(ssn, "ns/lo1", 1, 4), _whole(ssn, "ns/lo2", 1, 2)
    ordered = sort_for_preempt([low_roi, safe, high_roi], cpu(ssn, 1), ssn.dims.pods)
    assert names(ordered) == ["hi-w-0", "lo2-w-0", "lo1-w-0"]
    assert efficiency(safe, cpu(ssn, 1), ssn.dims.pods) == math.inf


def test_volcano_sort_bundles_for_reclaim_uses_queue_order_then_roi() -> None:
    # TestSortBundlesForReclaim_UsesQueueOrderThenROI: queue order first (qa before qb), then ROI.
    ssn = session([{"name": "ns/a", "queue": "qa", "min": 1, "phase": "Running"},
                   {"name": "ns/b", "queue": "qb", "min": 1, "phase": "Running"}],
                  running("a", 1) + running("b", 1))
    a, b = _whole(ssn, "ns/a", 1, 4), _whole(ssn, "ns/b", 1, 2)

    def by_name(left: Any, right: Any) -> int:
        return (left.name > right.name) - (left.name < right.name)

    assert names(sort_for_reclaim([b, a], cpu(ssn, 1), ssn.dims.pods, ssn.queue_of, by_name)) == ["a-w-0", "b-w-0"]
    assert names(sort_for_reclaim([a, b], cpu(ssn, 1), ssn.dims.pods, ssn.queue_of, lambda _l, _r: 0)) == [
        "b-w-0", "a-w-0"]  # no queue order: the higher ROI first


def test_volcano_sort_bundles_for_reclaim_deterministic_tie_breaker() -> None:
    # TestSortBundlesForReclaim_DeterministicTieBreaker: equal in everything, the lower job uid first.
    ssn = session([{"name": "ns/ja", "min": 1, "phase": "Running"}, {"name": "ns/jb", "min": 1, "phase": "Running"}],
                  running("ja", 1) + running("jb", 1))
    a, b = _whole(ssn, "ns/ja", 1, 2), _whole(ssn, "ns/jb", 1, 2)
    assert names(sort_for_reclaim([b, a], cpu(ssn, 1), ssn.dims.pods, ssn.queue_of, lambda _l, _r: 0)) == [
        "ja-w-0", "jb-w-0"]


def test_upstream_importance_orders_victims_of_equal_kind_and_priority() -> None:
    # KEP-5710's hierarchy, least important first: lower priority, single pods before gangs, smaller gangs before
    # larger, later start before earlier.
    groups = [{"name": "ns/prio1", "min": 2, "phase": "Running", "priorityClassName": "p1"},
              {"name": "ns/single", "min": 1, "phase": "Running", "priorityClassName": "p10"},
              {"name": "ns/small", "min": 2, "phase": "Running", "priorityClassName": "p10"},
              {"name": "ns/big-old", "min": 4, "phase": "Running", "priorityClassName": "p10"},
              {"name": "ns/big-new", "min": 4, "phase": "Running", "priorityClassName": "p10"}]
    pods = (running("prio1", 2, priorityClassName="p1") + running("single", 1, priorityClassName="p10")
            + running("small", 2, priorityClassName="p10")
            + running("big-old", 4, priorityClassName="p10", created="2026-01-01T00:00:00Z")
            + running("big-new", 4, priorityClassName="p10", created="2026-01-01T01:00:00Z"))
    ssn = session(groups, pods)
    bundles = [b for key in sorted(ssn.jobs) for b in job_bundles(ssn.jobs[key], members(ssn.jobs[key]), LOCAL,
                                                                    ssn.dims.zeros())]
    ordered = sort_for_preempt(bundles, cpu(ssn, 2), ssn.dims.pods)
    assert [b.job.name for b in ordered] == ["prio1", "single", "small", "big-new", "big-old"]


def test_surplus_before_whole_whatever_the_priority() -> None:
    ssn = session([{"name": "ns/wide", "min": 1, "phase": "Running", "priorityClassName": "p50"},
                   {"name": "ns/low", "min": 2, "phase": "Running", "priorityClassName": "p1"}],
                  running("wide", 2, priorityClassName="p50") + running("low", 2, priorityClassName="p1"))
    bundles = [b for key in sorted(ssn.jobs) for b in job_bundles(ssn.jobs[key], members(ssn.jobs[key]), LOCAL,
                                                                    ssn.dims.zeros())]
    ordered = sort_for_preempt(bundles, cpu(ssn, 1), ssn.dims.pods)
    assert [(b.job.name, b.kind) for b in ordered] == [
        ("wide", BundleKind.SURPLUS), ("low", BundleKind.WHOLE), ("wide", BundleKind.WHOLE)]


def test_a_whole_bundle_takes_every_member_on_every_node_and_frees_only_the_domains() -> None:
    # Volcano's whole bundle holds the domain's members only; here the gang goes whole or not at all.
    ssn = session([{"name": "ns/j", "min": 4, "phase": "Running"}], running("j", 2) + running("j", 2, node="n2",
                                                                                              start=2))
    job = ssn.jobs["ns/j"]
    [whole] = job_bundles(job, members(job), frozenset({"n1"}), ssn.dims.zeros())
    assert whole.kind is BundleKind.WHOLE and len(whole.tasks) == 4
    assert whole.local[ssn.dims.index["cpu"]] == 2000 and whole.cost is not None
    assert whole.cost[ssn.dims.index["cpu"]] == 4000
    assert job_bundles(job, members(job), frozenset(), ssn.dims.zeros()) == []  # nothing in the domain


def test_no_whole_bundle_when_a_member_may_not_be_evicted() -> None:
    ssn = session([{"name": "ns/j", "min": 3, "phase": "Running"}], running("j", 3))
    job = ssn.jobs["ns/j"]
    eligible = members(job)[1:]  # the first member is not preemptable
    assert job_bundles(job, eligible, LOCAL, ssn.dims.zeros()) == []
