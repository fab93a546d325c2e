"""Shared fixtures. `control_plane` is the real Kubernetes control plane of the e2e and conformance tiers.

One control plane per test session (etcd + kube-apiserver + kube-scheduler, simulated nodes, the simulated
kubelet on the session's event loop, and `lapilli serve` with the extender once it exists): the same code
as `lapilli dev up`. Tests under tests/e2e and tests/conformance are marked `e2e` and run on the session
event loop (the fixture's client lives there). Binaries come from LAPILLI_K8S_BIN or the `make k8s` cache;
if they cannot be found the tier fails with the reason, it is never skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from assembly.dev import BinariesNotFound, ClusterSpec, DevCluster, NodeShape, find_binaries

CONTROL_PLANE_NODES = 4
MANUAL_SCHEDULER = "lapilli-e2e-manual"
_REAL_TIERS = ("e2e", "conformance")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(part in _REAL_TIERS for part in Path(str(item.path)).parts):
            item.add_marker(pytest.mark.e2e)
            if asyncio.iscoroutinefunction(getattr(item, "function", None)):
                # Prepended: in auto mode the item already carries a bare `asyncio` mark, and the first one wins.
                item.add_marker(pytest.mark.asyncio(loop_scope="session"), append=False)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def control_plane(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    """A running dev cluster: `.kubeconfig`, `.client` (admin KubeClient), `.ensure_namespace(name)`,
    `.add_node(name, shape)`, `.kubectl(*args)`, `.kubelet` (the SimKubelet), `.info` (ports, version)."""
    try:
        binaries, missing = find_binaries(), ""
    except BinariesNotFound as exc:
        missing = str(exc)
    if missing:
        pytest.fail(f"the real control plane is required for this tier: {missing}", pytrace=False)
    spec = ClusterSpec(
        state_dir=tmp_path_factory.mktemp("control-plane"), nodes=CONTROL_PLANE_NODES,
        shape=NodeShape(cpu="64", memory="512Gi", gpus=8), kubelet="inprocess", tie_to_parent=True,
        heartbeat_s=10.0,
        # A second scheduler name the service serves and no kube-scheduler profile does: tests that play
        # kube-scheduler themselves (filter, then bind) use it, so the real kube-scheduler never races them.
        serve_args=("--scheduler-name", "volcano", "--scheduler-name", MANUAL_SCHEDULER),
    )
    cluster = DevCluster(spec, binaries)
    await cluster.up()
    try:
        yield cluster
    finally:
        await cluster.down()
