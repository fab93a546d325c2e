"""KubeClient.list follows `continue` pages and hands each item to `transform` as its page arrives: a Reflector
that slims 50,000 pods never holds them all whole (a small aiohttp app serves the pages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from lapilli.kube import KubeClient, load_config
from lapilli.kube.resources import PODS
from tests.unit.lapilli.kube.test_kube_client_auth import kubeconfig


async def test_each_page_is_transformed_before_the_next_is_asked_for(tmp_path: Path, aiohttp_server: Any) -> None:
    asked: list[str] = []

    async def pods(request: web.Request) -> web.StreamResponse:
        asked.append(request.query.get("continue", ""))
        page = len(asked)
        items = [{"metadata": {"name": f"p{page}-{i}", "namespace": "ns"}, "spec": {"big": "x" * 100}} for i in range(2)]
        cont = {"continue": "next"} if page == 1 else {}
        return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": "7", **cont}, "items": items})

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    server = await aiohttp_server(app)
    token = tmp_path / "token"
    token.write_text("t")
    seen: list[tuple[str, int]] = []

    def slim(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append((obj["metadata"]["name"], len(asked)))
        obj.pop("spec")
        return obj

    async with KubeClient(load_config(kubeconfig(tmp_path, str(server.make_url("")), token))) as client:
        listed = await client.list(PODS, page_size=2, transform=slim)
    assert asked == ["", "next"]
    assert seen == [("p1-0", 1), ("p1-1", 1), ("p2-0", 2), ("p2-1", 2)]
    assert listed.resource_version == "7"
    assert [item for item in listed.items if "spec" in item or item["kind"] != "Pod"] == []
