"""The simulated GPU exporter (assembly/dev/gpumetrics.py): utilisation from a pod's annotation over its run, series
labelled as the DCGM exporter labels them, and what the kubelet's slim pod store keeps for it."""

from __future__ import annotations

import pytest

from assembly.dev.gpumetrics import exposition, node_series, utilisation
from assembly.dev.podsim import slim_pod


def _pod(name: str, gpus: int, util: str | None = None) -> dict:
    notes = {"sim.lapilli.io/gpu-util": util} if util is not None else {}
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"metadata": {"name": name, "namespace": "ml", "annotations": notes},
            "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "x", "resources": resources}]},
            "status": {"phase": "Running"}}


def test_utilisation_follows_the_schedule_from_the_pod_start() -> None:
    pod = _pod("a", 1, "90, 0@10m, 50@1h")
    assert [utilisation(pod, t) for t in (0, 599, 600, 3599, 3600)] == [90, 90, 0, 0, 50]
    assert utilisation(_pod("b", 1), 5) == 100, "no annotation: busy"
    assert utilisation(_pod("c", 1, "0@30s"), 0) == 100 and utilisation(_pod("c", 1, "0@30s"), 30) == 0
    for bad in ("lots", "120", "5@soon"):
        with pytest.raises(ValueError):
            utilisation(_pod("d", 1, bad), 0)


def test_series_are_labelled_like_the_dcgm_exporters() -> None:
    series, problems = node_series("n1", [(_pod("b", 2, "0"), 5.0), (_pod("a", 1, "42"), 5.0), (_pod("cpu", 0), 1.0),
                                          (_pod("bad", 1, "x"), 1.0)])
    assert [(s.pod, s.gpu, s.value) for s in series] == [("a", 0, 42.0), ("b", 1, 0.0), ("b", 2, 0.0)]
    assert list(problems) == ["ml/bad"] and "'x' is not a percentage" in problems["ml/bad"]
    text = exposition(series[:1])
    assert text.splitlines() == [
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-sim-n1-0",device="nvidia0",modelName="Lapilli Simulated GPU",'
        'Hostname="n1",container="main",namespace="ml",pod="a"} 42']


def test_the_kubelets_slim_pod_keeps_what_the_exporter_reads() -> None:
    slim = slim_pod({**_pod("a", 2, "7"), "metadata": {"name": "a", "namespace": "ml", "annotations": {
        "sim.lapilli.io/gpu-util": "7", "other": "dropped"}}})
    assert slim["metadata"]["annotations"] == {"sim.lapilli.io/gpu-util": "7"}
    assert slim["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert utilisation(slim, 0) == 7 and node_series("n1", [(slim, 0.0)])[0][1].gpu == 1
