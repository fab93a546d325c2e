"""Pod-level resources in a task template (`template.spec.resources`), as Volcano's job webhook validates them
through upstream ValidatePodTemplate with PodLevelResources on. Messages as Volcano's own test rows give them."""

import pytest

from tests.service.reviews import job, queue, review, task
from webhook.context import AdmissionContext
from webhook.jobs import validate_job
from webhook.jobs.podresources import aggregate, pod_resources_errors
from webhook.listers import MemoryQueues
from webhook.review import AdmissionReview

CTX = AdmissionContext(queues=MemoryQueues([queue("default")]))


def c(name, requests=None, limits=None, **extra):
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"name": name, "image": "busybox:1.36", "resources": resources, **extra}


def pod_spec(resources, containers, init=()):
    spec = {"restartPolicy": "OnFailure", "containers": list(containers), "resources": resources}
    if init:
        spec["initContainers"] = list(init)
    return spec


def admit(spec):
    t = task("task-1", 1)
    t["template"]["spec"] = spec
    obj = job("job1", t, queue="default")
    return validate_job(AdmissionReview.model_validate(review(obj)).request, CTX)


def test_volcanos_valid_row_is_admitted():
    pod = {"cpu": "4", "memory": "8Gi", "hugepages-1Mi": "2Gi"}
    ctr = {"cpu": "2", "memory": "4Gi", "hugepages-1Mi": "1Gi"}
    assert admit(pod_spec({"requests": pod, "limits": pod}, [c("fake-name", ctr, ctr)])).allowed


def test_requests_below_the_aggregate_of_containers_and_init_containers():
    # Volcano's row: pod cpu 2 against two containers of 2 (the init container's 2 does not add)
    pod = {"cpu": "2", "hugepages-1Mi": "2Gi", "hugepages-1Ki": "2Gi"}
    spec = pod_spec({"requests": pod, "limits": pod}, [c("fake-name-1", {"cpu": "2"}), c("fake-name-2", {"cpu": "2"})],
                    init=[c("fake-name-0", {"cpu": "2"})])
    outcome = admit(spec)
    assert (outcome.allowed, outcome.message) == (
        False,
        'spec.task[0].template.spec.resources.requests[cpu]: Invalid value: "2": '
        "must be greater than or equal to aggregate container requests of 4.",
    )


def test_requests_above_limits():
    # Volcano's row: pod requests 6 cpu, limits 4
    both = {"cpu": "2"}
    spec = pod_spec({"requests": {"cpu": "6"}, "limits": {"cpu": "4"}}, [c("a", both, both), c("b", both, both)])
    assert admit(spec).message == (
        'spec.task[0].template.spec.resources.requests: Invalid value: "6": must be less than or equal to cpu limit of 4.'
    )


def test_every_problem_is_listed_with_go_quantities():
    spec = pod_spec(
        {"requests": {"memory": "1536Mi", "nvidia.com/gpu": "1"}, "limits": {"cpu": "1000m"}, "claims": [{"name": "x"}]},
        [c("a", {"memory": "1Gi"}, {"cpu": "1500m"}), c("b", {"memory": "1Gi"})],
    )
    assert pod_resources_errors(spec) == [
        "template.spec.resources.claims: Forbidden: claims cannot be set for Resources at pod-level",
        'template.spec.resources.requests[nvidia.com/gpu]: Unsupported value: "nvidia.com/gpu": supported values: '
        '"cpu", "hugepages-", "memory"',
        'template.spec.resources.requests[memory]: Invalid value: "1536Mi": '
        "must be greater than or equal to aggregate container requests of 2Gi",
        'template.spec.resources.containers[0][cpu].limits: Invalid value: "1500m": '
        "must be less than or equal to pod limits of 1",
    ]


def test_defaulting_fills_requests_from_limits_and_containers():
    # limits only: the pod request defaults to the containers' aggregate (cpu) or else the pod limit (memory)
    spec = pod_spec({"limits": {"cpu": "4", "memory": "8Gi"}}, [c("a", {"cpu": "3"}), c("b", {"cpu": "2"})])
    assert pod_resources_errors(spec) == []
    # a request that is set is compared, a missing one with no limits is not
    spec = pod_spec({"requests": {"cpu": "1"}}, [c("a", {"cpu": "3", "memory": "9Gi"})])
    assert pod_resources_errors(spec) == [
        'template.spec.resources.requests[cpu]: Invalid value: "1": '
        "must be greater than or equal to aggregate container requests of 3"
    ]


def test_sidecars_count_for_the_whole_life_of_the_pod():
    sidecar = c("proxy", {"cpu": "500m"}, restartPolicy="Always")
    spec = pod_spec({"requests": {"cpu": "2"}}, [c("main", {"cpu": "2"})], init=[sidecar, c("setup", {"cpu": "1"})])
    assert aggregate(spec, "requests")["cpu"][0] == 2.5
    assert pod_resources_errors(spec)[0].endswith("aggregate container requests of 2500m")


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"requests": {"hugepages-2Mi": "4Mi", "cpu": "1"}},
         "template.spec.resources.limits: Required value: Limit must be set for non overcommitable resources"),
        ({"requests": {"hugepages-2Mi": "4Mi"}, "limits": {"hugepages-2Mi": "4Mi"}},
         "template.spec.resources: Forbidden: HugePages require cpu or memory"),
        ({"limits": {"hugepages-2Mi": "3Mi", "cpu": "1"}},
         'template.spec.resources.limits[hugepages-2Mi]: Invalid value: "3Mi": 3Mi is not positive integer multiple '
         "of hugepages-2Mi"),
        ({"limits": {"cpu": "-1"}},
         'template.spec.resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ],
)
def test_resource_requirement_rules(resources, message):
    assert message in pod_resources_errors(pod_spec(resources, [c("a")]))


def test_templates_without_pod_level_resources_are_untouched():
    spec = pod_spec(None, [c("a", {"cpu": "64", "nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})])
    assert pod_resources_errors(spec) == []
    assert admit(spec).allowed


def test_gpu_containers_are_not_compared_with_a_pod_level_cpu_budget():
    spec = pod_spec({"requests": {"cpu": "8", "memory": "32Gi"}},
                    [c("a", {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})])
    assert pod_resources_errors(spec) == []


def test_malformed_pod_resources_are_denied_not_crashed():
    outcome = admit(pod_spec("lots", [c("a")]))
    assert not outcome.allowed and "template.spec.resources" in outcome.message
