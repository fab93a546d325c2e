"""The fault tier's own control plane: these tests kill kube-apiserver and the service, so they never share the
session's cluster. One cluster for the whole package (2 nodes of 4 GPUs: 8 GPUs, as the burst test asks),
each test leaving it running and whole."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from assembly.dev import BinariesNotFound, ClusterSpec, DevCluster, NodeShape, find_binaries
from tests.e2e.faults.helpers import NS


@pytest_asyncio.fixture(scope="package", loop_scope="session")
async def faults(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevCluster]:
    try:
        binaries, missing = find_binaries(), ""
    except BinariesNotFound as exc:
        missing = str(exc)
    if missing:
        pytest.fail(f"the real control plane is required for this tier: {missing}", pytrace=False)
    spec = ClusterSpec(
        state_dir=tmp_path_factory.mktemp("faults"), nodes=2, shape=NodeShape(cpu="64", memory="512Gi", gpus=4),
        kubelet="inprocess", tie_to_parent=True, heartbeat_s=10.0, extender=True,
    )
    cluster = DevCluster(spec, binaries)
    await cluster.up()
    try:
        await cluster.ensure_namespace(NS)
        yield cluster
    finally:
        await cluster.down()
