"""A 401 makes the client ask its credential source again at once and retry — for a watch as for a request: a
token rotated under a long-lived reflector would otherwise leave it retrying the stale token until the periodic
refresh. The API server here is a small aiohttp app that takes only the current token of a rotating token file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import web

from lapilli.kube import KubeClient, load_config
from lapilli.kube.resources import PODS


def kubeconfig(tmp_path: Path, server: str, token_file: Path) -> Path:
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"tokenFile": str(token_file)}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


async def api_server(aiohttp_server: Any, token_file: Path, seen: list[str]) -> Any:
    async def pods(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != f"Bearer {token_file.read_text().strip()}":
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        if request.query.get("watch") != "true":
            return web.json_response({"kind": "PodList", "metadata": {"resourceVersion": "1"}, "items": []})
        stream = web.StreamResponse()
        await stream.prepare(request)
        event = {"type": "ADDED", "object": {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "2"}}}
        await stream.write(orjson.dumps(event) + b"\n")
        return stream

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    return await aiohttp_server(app)


async def rotated_client(tmp_path: Path, aiohttp_server: Any, seen: list[str]) -> KubeClient:
    token_file = tmp_path / "token"
    token_file.write_text("first")
    server = await api_server(aiohttp_server, token_file, seen)
    client = KubeClient(load_config(kubeconfig(tmp_path, str(server.make_url("")), token_file)))
    await client.list(PODS)  # the first token is read and kept
    token_file.write_text("second")  # rotated: the kept one is refused from now on
    return client


async def test_a_watch_answered_401_fetches_fresh_credentials_and_opens(tmp_path: Path, aiohttp_server: Any) -> None:
    seen: list[str] = []
    async with await rotated_client(tmp_path, aiohttp_server, seen) as client:
        events = [event async for event in client.watch(PODS, resource_version="1", timeout_seconds=1)]
    assert [e.type for e in events] == ["ADDED"]
    assert seen == ["Bearer first", "Bearer first", "Bearer second"], "list, refused watch, watch with the new token"


async def test_a_request_answered_401_does_the_same(tmp_path: Path, aiohttp_server: Any) -> None:
    seen: list[str] = []
    async with await rotated_client(tmp_path, aiohttp_server, seen) as client:
        assert (await client.list(PODS)).resource_version == "1"
    assert seen == ["Bearer first", "Bearer first", "Bearer second"]
