"""A pod's resources from its containers, as Kubernetes' resourcehelper.PodRequests adds them up."""

from __future__ import annotations

from fractions import Fraction

from controller.quota import pod_totals
from lapilli.resources.units import pod_request


def _container(cpu: str, *, sidecar: bool = False) -> dict[str, object]:
    container: dict[str, object] = {"name": f"c{cpu}", "resources": {"requests": {"cpu": cpu}}}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def test_containers_add_up_and_an_init_container_counts_only_when_larger() -> None:
    spec = {"containers": [_container("1"), _container("2")], "initContainers": [_container("4")]}
    assert pod_request(spec)["cpu"] == 4000.0
    assert pod_totals(spec, "requests")["cpu"] == Fraction(4)
    spec["initContainers"] = [_container("2")]
    assert pod_request(spec)["cpu"] == 3000.0


def test_a_sidecar_adds_up_and_runs_beside_the_init_containers_after_it() -> None:
    spec = {"containers": [_container("1")], "initContainers": [_container("2", sidecar=True), _container("4")]}
    # steady state 1 + 2 = 3; init phase peak: the 4-cpu init container beside the sidecar = 6
    assert pod_request(spec)["cpu"] == 6000.0
    assert pod_totals(spec, "requests")["cpu"] == Fraction(6)


def test_a_sidecar_started_after_an_init_container_never_ran_beside_it() -> None:
    spec = {"containers": [_container("1")], "initContainers": [_container("5"), _container("2", sidecar=True)]}
    # init phase peak 5 (alone), steady state 1 + 2 = 3: the pod needs 5, not 5 + 2
    assert pod_request(spec)["cpu"] == 5000.0
    assert pod_totals(spec, "requests")["cpu"] == Fraction(5)


def test_a_zero_request_adds_no_resource_name() -> None:
    spec = {"containers": [_container("1")], "initContainers": [{"name": "z", "resources": {"requests": {"x.io/y": "0"}}}]}
    assert "x.io/y" not in pod_totals(spec, "requests")
