"""The idle windows (extender/service/idle/track.py): readings in, conditions, Events and reclaimable pods out, on the
test's clock."""

from __future__ import annotations

from typing import Any

from extender.engine.snapshot import Snapshot, build_snapshot
from extender.service.idle.loop import usage_by_pod
from extender.service.idle.settings import IdleGpuSettings
from extender.service.idle.track import IdleTracker
from lapilli.idlegpu import IDLE_CONDITION
from lapilli.prometheus import Sample
from lapilli.times import rfc3339
from tests.unit.extender.engine.builders import node, pod, podgroup, queue

WINDOW, GRACE = 600.0, 300.0
T0 = 1_700_000_000.0


def _settings(mode: str = "on", policy: str = "warn") -> IdleGpuSettings:
    return IdleGpuSettings(mode=mode, prometheus_url="http://prom:9090", threshold_percent=5.0, window_s=WINDOW,
                           grace_s=GRACE, default_policy=policy)


def _snap(*, queue_policy: str | None = "reclaim", job_annotations: dict[str, str] | None = None,
          condition: dict[str, Any] | None = None, gpu: str = "2") -> Snapshot:
    q = queue({"name": "lab", "annotations": {"lapilli.io/idle-gpu-policy": queue_policy} if queue_policy else {}})
    pg = podgroup({"name": "ml/nb", "queue": "lab", "min": 1, "phase": "Running",
                   "annotations": job_annotations or {}, **({"conditions": [condition]} if condition else {})})
    pods = [pod({"name": f"ml/nb-{i}", "group": "nb", "req": {"cpu": "1", "nvidia.com/gpu": gpu}, "node": "n1",
                 "phase": "Running"}) for i in range(2)]
    return build_snapshot([node({"name": "n1", "alloc": {"cpu": "8", "nvidia.com/gpu": "4"}}), q, pg, *pods])


IDLE = {"ml/nb-0": 0.0, "ml/nb-1": 3.0}
PODS = frozenset({"ml/nb-0", "ml/nb-1"})


def _stored(condition: dict[str, str], at: float, **kwargs: Any) -> Snapshot:
    """`_snap(**kwargs)` with the condition as the API server would hold it once written at `at`."""
    return _snap(condition={**condition, "lastTransitionTime": rfc3339(at)}, **kwargs)


def test_warned_after_the_window_then_reclaimable_after_the_grace_period() -> None:
    tracker, snap = IdleTracker(_settings()), _snap()
    first = tracker.update(snap, IDLE, T0)
    assert first.conditions == {} and first.events == [] and first.reclaimable == frozenset()
    assert [(j.key, j.state) for j in first.jobs] == [("ml/nb", "idle")]

    warned = tracker.update(snap, IDLE, T0 + WINDOW)
    condition = warned.conditions["ml/nb"]
    assert (condition["type"], condition["status"], condition["reason"]) == (IDLE_CONDITION, "True", "Idle")
    assert "GPUs below 5% for 10m0s (busiest 3%)" in condition["message"]
    assert f"reclaimable from {rfc3339(T0 + WINDOW + GRACE)}" in condition["message"]
    assert [(e[1], e[2]) for e in warned.events] == [("Warning", "IdleGPU")] and warned.reclaimable == frozenset()

    snap = _stored(condition, T0 + WINDOW)
    assert tracker.update(snap, IDLE, T0 + WINDOW + 60).conditions == {}, "same reason: not rewritten"
    due = tracker.update(snap, IDLE, T0 + WINDOW + GRACE)
    assert due.conditions["ml/nb"]["reason"] == "Reclaimable"
    assert [(e[1], e[2]) for e in due.events] == [("Warning", "IdleGPUReclaimable")]
    assert due.reclaimable == PODS


def test_a_busy_reading_ends_the_window_and_flips_a_warning() -> None:
    tracker, snap = IdleTracker(_settings()), _snap()
    tracker.update(snap, IDLE, T0)
    busy = tracker.update(snap, {"ml/nb-0": 0.0, "ml/nb-1": 40.0}, T0 + WINDOW)
    assert busy.conditions == {} and busy.jobs == [], "one busy pod keeps the job busy"
    assert tracker.update(snap, IDLE, T0 + WINDOW + 1).conditions == {}, "the window started again"

    warned = _snap(condition={"type": IDLE_CONDITION, "status": "True", "reason": "Idle", "message": "m"})
    back = tracker.update(warned, {"ml/nb-0": 55.0, "ml/nb-1": 0.0}, T0 + 2 * WINDOW)
    assert back.conditions["ml/nb"]["status"] == "False" and back.conditions["ml/nb"]["reason"] == "Active"
    assert "GPUs in use again (55% at the busiest pod)" in back.conditions["ml/nb"]["message"]
    assert [(e[1], e[2]) for e in back.events] == [("Normal", "IdleGPUActive")]


def test_missing_readings_never_count_as_idle() -> None:
    tracker, snap = IdleTracker(_settings()), _snap()
    tracker.update(snap, {"ml/nb-0": 0.0}, T0)
    assert tracker.update(snap, {"ml/nb-0": 0.0}, T0 + WINDOW).conditions == {}
    warned = _snap(condition={"type": IDLE_CONDITION, "status": "True", "reason": "Reclaimable", "message": "m"})
    gap = tracker.update(warned, {"ml/nb-0": 0.0}, T0 + WINDOW)
    assert gap.conditions["ml/nb"]["reason"] == "Active" and gap.reclaimable == frozenset()
    assert "no GPU utilisation reading for pod nb-1" in gap.conditions["ml/nb"]["message"]
    failed = IdleTracker(_settings()).update(warned, None, T0)
    assert failed.failed and failed.conditions == {} and failed.reclaimable == frozenset()


def test_policy_mode_and_opt_out() -> None:
    for settings, kwargs, reason in [
        (_settings(mode="dry-run"), {}, "ReclaimableDryRun"),
        (_settings(), {"queue_policy": "warn"}, "Idle"),
        (_settings(policy="reclaim"), {"queue_policy": None}, "Reclaimable"),  # the service's default
    ]:
        tracker, snap = IdleTracker(settings), _snap(**kwargs)
        tracker.update(snap, IDLE, T0)
        warned = tracker.update(snap, IDLE, T0 + WINDOW)
        due = tracker.update(_stored(warned.conditions["ml/nb"], T0 + WINDOW, **kwargs), IDLE, T0 + WINDOW + GRACE)
        got = (due.conditions.get("ml/nb") or warned.conditions["ml/nb"])["reason"]
        assert got == reason, settings
        assert due.reclaimable == (PODS if reason == "Reclaimable" else frozenset()), settings
    for snap in (_snap(queue_policy="off"), _snap(job_annotations={"lapilli.io/idle-gpu-reclaim": "false"}),
                 _snap(gpu="0")):
        tracker = IdleTracker(_settings())
        tracker.update(snap, IDLE, T0)
        later = tracker.update(snap, IDLE, T0 + WINDOW + GRACE)
        assert later.conditions == {} and later.jobs == [] and later.reclaimable == frozenset()


def test_a_new_leader_keeps_the_warning_time() -> None:
    warned_at = T0 + WINDOW
    snap = _snap(condition={"type": IDLE_CONDITION, "status": "True", "reason": "Idle", "message": "m",
                            "lastTransitionTime": rfc3339(warned_at)})
    tracker = IdleTracker(_settings())
    assert tracker.update(snap, IDLE, warned_at + GRACE - 1).conditions == {}, "the grace period is not restarted"
    due = tracker.update(snap, IDLE, warned_at + GRACE)
    assert due.conditions["ml/nb"]["reason"] == "Reclaimable" and due.reclaimable == PODS
    assert "for 15m0s" in due.conditions["ml/nb"]["message"], "idle since a window before the warning"


def test_readings_name_pods_by_the_dcgm_exporters_labels() -> None:
    samples = [Sample({"namespace": "ml", "pod": "a", "gpu": "0"}, 3.0),
               Sample({"namespace": "ml", "pod": "a", "gpu": "1"}, 9.0),
               Sample({"pod_namespace": "ml", "pod_name": "b"}, 0.0),
               Sample({"gpu": "2"}, 50.0)]
    assert usage_by_pod(samples) == {"ml/a": 9.0, "ml/b": 0.0}


def test_settings_are_checked_once() -> None:
    assert IdleGpuSettings().problems() == [], "off by default, nothing else needed"
    problems = IdleGpuSettings(mode="on", threshold_percent=0, interval_s=0).problems()
    assert problems == ["--idle-gpu-mode on needs --prometheus-url (http:// or https://), got ''",
                        "--idle-gpu-threshold 0 must be a percentage above 0",
                        "--idle-gpu-interval 0 must be > 0 seconds"]
    assert IdleGpuSettings(mode="sometimes", default_policy="always").problems() == [
        "--idle-gpu-mode 'sometimes' is not one of off, dry-run, on",
        "--idle-gpu-default-policy 'always' is not one of reclaim, warn, off"]


def test_turned_off_clears_what_an_earlier_run_left() -> None:
    left = _snap(condition={"type": IDLE_CONDITION, "status": "True", "reason": "Reclaimable", "message": "m"})
    cleared = IdleTracker(_settings(mode="off")).turned_off(left)
    assert cleared.conditions["ml/nb"]["status"] == "False" and cleared.reclaimable == frozenset()
    assert "idle-GPU reclaim is off" in cleared.conditions["ml/nb"]["message"]
    assert IdleTracker(_settings(mode="off")).turned_off(_snap()).conditions == {}
