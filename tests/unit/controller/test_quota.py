"""A pod spec's ResourceQuota usage and the scheduler's view of it."""

from fractions import Fraction

from controller.quota import pod_quota_usage, scheduler_view


def test_quota_usage_of_a_pod_spec():
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
                                        "limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"memory": "64Mi"},
    }
    usage = pod_quota_usage(spec)
    assert usage["cpu"] == usage["requests.cpu"] == 2  # the init container needs more than both containers
    assert usage["memory"] == 2 * 2**30 + 64 * 2**20
    assert usage["limits.cpu"] == 1 and "limits.memory" not in usage
    assert usage["nvidia.com/gpu"] == usage["requests.nvidia.com/gpu"] == 1
    assert usage["pods"] == usage["count/pods"] == 1
    view = scheduler_view(usage)
    assert set(view) == {"cpu", "memory", "nvidia.com/gpu", "pods"}


def test_limits_only_containers_ask_for_nothing():
    usage = pod_quota_usage({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]})
    assert scheduler_view(usage) == {"pods": Fraction(1)}
