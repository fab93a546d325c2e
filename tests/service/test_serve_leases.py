"""How `lapilli serve` wires leader election: the extender and the controllers each get a Lease of their own
under one identity per process, both shown on the `lapilli_leader` gauge; the controllers write through a
client fenced by theirs, and so do the extender's binds, evictions and status writes; `--no-leader-elect` wires
none of it."""

from pathlib import Path

import pytest

from assembly.serve import ExtenderSettings, Settings, WebhookSettings, build
from controller.settings import ControllerSettings
from lapilli.kube import Fenced, KubeClient, KubeConfig
from lapilli.kube.resources import PODGROUPS, PODS
from webhook.certs import generate, write_bundle

pytestmark = pytest.mark.asyncio(loop_scope="session")


def settings(tmp_path: Path, **groups) -> Settings:
    paths = write_bundle(generate(["localhost"]), tmp_path)
    webhook = WebhookSettings(tls_cert_file=paths["tls.crt"], tls_key_file=paths["tls.key"])
    return Settings(webhook=webhook, **groups).check()


async def test_each_face_gets_its_own_lease_under_one_identity(tmp_path: Path):
    async with KubeClient(KubeConfig(server="http://127.0.0.1:1")) as client:
        service = build(settings(tmp_path), client)
        extender, controllers = service.component("extender"), service.component("controllers")
        assert extender.elector.lease == "lapilli-system/lapilli-extender"  # type: ignore[attr-defined]
        assert controllers.elector.lease == "lapilli-system/lapilli-controllers"  # type: ignore[attr-defined]
        identity = controllers.elector.identity  # type: ignore[attr-defined]
        assert extender.elector.identity == identity  # type: ignore[attr-defined]
        for lease in ("lapilli-system/lapilli-extender", "lapilli-system/lapilli-controllers"):
            assert service.registry.get_sample_value("lapilli_leader", {"lease": lease, "identity": identity}) == 0
        with pytest.raises(Fenced, match="controllers' Lease lapilli-system/lapilli-controllers"):
            await controllers.client.create(PODS, {"metadata": {"name": "p"}}, "ns")  # type: ignore[attr-defined]
        # The extender's binds, evictions and status writes are fenced by its own Lease (the server here does
        # not exist: a write that got past the fence would fail to connect instead).
        with pytest.raises(Fenced, match="extender's Lease lapilli-system/lapilli-extender"):
            await extender.extender.client.bind("ns", "p", "n1")  # type: ignore[attr-defined]
        with pytest.raises(Fenced, match="extender's Lease lapilli-system/lapilli-extender"):
            await extender.loop.client.patch_status(  # type: ignore[attr-defined]
                PODGROUPS, "pg", {"status": {"phase": "Inqueue"}}, "ns")


async def test_without_leader_election_every_replica_acts(tmp_path: Path):
    groups = {"extender": ExtenderSettings(leader_elect=False),
              "controllers": ControllerSettings(leader_elect=False, lease_name="lapilli-extender")}
    async with KubeClient(KubeConfig(server="http://127.0.0.1:1")) as client:
        service = build(settings(tmp_path, **groups), client)
        extender, controllers = service.component("extender"), service.component("controllers")
        assert extender.elector is None and controllers.elector is None  # type: ignore[attr-defined]
        assert controllers.client is client  # type: ignore[attr-defined]
        assert extender.is_leader()  # type: ignore[attr-defined]


async def test_one_list_and_watch_of_each_kind_serves_the_caches_the_extender_and_the_controllers(tmp_path: Path):
    async with KubeClient(KubeConfig(server="http://127.0.0.1:1")) as client:
        service = build(settings(tmp_path), client)
        caches, extender, controllers = (service.component(n) for n in ("caches", "extender", "controllers"))
        state = extender.state  # type: ignore[attr-defined]
        warm = {r.resource: r for r in controllers.warm.reflectors}  # type: ignore[attr-defined]
        for kind in ("Pod", "PodGroup", "Queue", "PriorityClass"):
            mine = next(r for r in state.reflectors if r.resource.kind == kind)
            assert next(r for res, r in warm.items() if res.kind == kind) is mine, kind
        assert caches.queue_reflector is next(r for r in state.reflectors if r.resource.kind == "Queue")  # type: ignore[attr-defined]
        assert caches.job_reflector is warm[next(res for res in warm if res.kind == "Job")]  # type: ignore[attr-defined]
