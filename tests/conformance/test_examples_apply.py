"""Every Kubernetes manifest in examples/ applies unchanged with kubectl, and reads back with Volcano's
printer columns (`kubectl get <kind> -o wide`).

Top-level examples/*.yaml only: examples/sim/ holds simulator workloads (lapilli simulate), not objects for
a cluster. A file that is neither Kubernetes objects nor a Volcano scheduler configuration fails the test,
so nothing is skipped by accident. Namespaces, PriorityClasses and Queues are applied first, as a user would;
namespaces that objects name but no example defines (volcano-system) are made by the harness.

Two seed queues from the Volcano overview set a guarantee without a deserved; Volcano refuses them since v1.13
and so does Lapilli's webhook, with Volcano's message. They are kept unchanged and checked to be refused;
queues-for-examples.yaml holds ml-training with its deserved, so the jobs that name it still apply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from assembly.dev import DevCluster
from lapilli.kube import resource_for
from tests.e2e.test_controller_helpers import remove_example_jobs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
CRDS = ROOT / "manifests" / "crds"
FIRST = {"Namespace": 0, "PriorityClass": 0, "Queue": 1}  # what other examples depend on


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def is_scheduler_conf(docs: list[dict[str, Any]]) -> bool:
    return all("kind" not in d and "actions" in d for d in docs)


REFUSED = {  # example -> a part of the message Volcano (>= 1.13) answers with
    "queue-ml-training.yaml": 'requestBody.spec.deserved.cpu: Invalid value: "<nil>": deserved[cpu] must be >= '
    "guarantee[cpu]=16",
    "queues-multi-tenant.yaml": "deserved[nvidia.com/gpu] must be >= guarantee[nvidia.com/gpu]=4",
}
MANIFESTS = [p for p in EXAMPLES if not is_scheduler_conf(documents(p)) and p.name not in REFUSED]


def rank(path: Path) -> int:
    return max(FIRST.get(d.get("kind", ""), 2) for d in documents(path))


def printer_columns() -> dict[tuple[str, str], list[tuple[str, int]]]:
    """(apiVersion, kind) -> [(column name, priority)] from the CRDs as installed."""
    out = {}
    for path in CRDS.glob("*.yaml"):
        for crd in documents(path):
            if crd.get("kind") != "CustomResourceDefinition":
                continue
            spec = crd["spec"]
            for version in spec["versions"]:
                columns = [(c["name"], c.get("priority", 0)) for c in version.get("additionalPrinterColumns", [])]
                out[(f"{spec['group']}/{version['name']}", spec["names"]["kind"])] = columns
    return out


def kubectl_resource(obj: dict[str, Any]) -> str:
    """`jobs.batch.volcano.sh`, never the ambiguous `job` (batch/v1 has one too)."""
    res = resource_for(obj["apiVersion"], obj["kind"])
    return f"{res.plural}.{res.group}" if res.group else res.plural


def test_every_example_is_a_manifest_or_a_scheduler_conf():
    for path in EXAMPLES:
        docs = documents(path)
        assert docs, f"{path.name} is empty"
        assert is_scheduler_conf(docs) or all(d.get("apiVersion") and d.get("kind") for d in docs), (
            f"{path.name}: neither Kubernetes objects nor a Volcano scheduler configuration"
        )
    assert len(MANIFESTS) >= 10


@pytest.fixture(scope="module")
async def prerequisites(control_plane: DevCluster) -> AsyncIterator[DevCluster]:
    defined = {d["metadata"]["name"] for p in MANIFESTS for d in documents(p) if d["kind"] == "Namespace"}
    named = {d["metadata"].get("namespace") for p in MANIFESTS for d in documents(p)} - {None}
    for namespace in sorted(named - defined):
        await control_plane.ensure_namespace(namespace)
    for path in sorted(MANIFESTS, key=lambda p: (rank(p), p.name)):
        if rank(path) < 2:
            control_plane.kubectl("apply", "-f", str(path))
    # Namespaces made by `kubectl apply` lack the ServiceAccount a controller-manager would add.
    for namespace in sorted(defined):
        await control_plane.ensure_namespace(namespace)
    yield control_plane
    # The examples' Jobs would hold the shared nodes' GPUs (vLLM alone takes two 8-GPU nodes) for every test after.
    assert control_plane.client is not None
    await remove_example_jobs(control_plane.client)


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_seed_queue_with_guarantee_but_no_deserved_is_refused_as_volcano_does(prerequisites: DevCluster, name):
    refused = prerequisites.kubectl("apply", "-f", str(ROOT / "examples" / name), check=False)
    assert refused.returncode != 0
    assert "denied the request" in refused.stderr and REFUSED[name] in refused.stderr, refused.stderr


@pytest.mark.parametrize("path", MANIFESTS, ids=[p.name for p in MANIFESTS])
async def test_example_applies_unchanged_and_reads_back(prerequisites: DevCluster, path: Path):
    applied = prerequisites.kubectl("apply", "-f", str(path))
    columns = printer_columns()
    for obj in documents(path):
        meta = obj["metadata"]
        assert f"/{meta['name']} " in applied.stdout, applied.stdout
        args = ["get", kubectl_resource(obj), meta["name"], "-o", "wide"]
        if resource_for(obj["apiVersion"], obj["kind"]).namespaced:
            args += ["-n", meta.get("namespace", "default")]
        header, *rows = prerequisites.kubectl(*args).stdout.splitlines()
        assert len(rows) == 1 and rows[0].split()[0] == meta["name"]
        expected = columns.get((obj["apiVersion"], obj["kind"]))
        if expected is not None:  # a Volcano kind: the CRD's printer columns, wide ones included
            assert header.split() == ["NAME", *(name for name, _ in expected)], header
