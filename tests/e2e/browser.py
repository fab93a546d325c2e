"""A real headless Debian `chromium`, driven over the Chrome DevTools protocol (aiohttp's websocket client): load a
page, read the DOM text, collect console errors and uncaught exceptions, take a screenshot."""

from __future__ import annotations

import asyncio
import base64
import itertools
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1280,1000", "--remote-debugging-port=0")


def chromium() -> str | None:
    return shutil.which("chromium")


class Page:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.errors: list[str] = []
        self.loaded = asyncio.Event()
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = msg.json()
            if "id" in data and data["id"] in self._waiting:
                self._waiting.pop(data["id"]).set_result(data)
                continue
            method, params = data.get("method"), data.get("params") or {}
            if method == "Runtime.exceptionThrown":
                self.errors.append(str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                self.errors.append(str(params["entry"].get("text")))
            elif method == "Page.loadEventFired":
                self.loaded.set()

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[ident] = future
        await self.ws.send_json({"id": ident, "method": method, "params": params})
        reply = await asyncio.wait_for(future, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result") or {}
        return result

    async def goto(self, url: str) -> None:
        self.loaded.clear()
        await self.call("Page.navigate", url=url)
        await asyncio.wait_for(self.loaded.wait(), 30)

    async def text(self, element_id: str) -> str:
        result = await self.call("Runtime.evaluate", returnByValue=True,
                                 expression=f"document.getElementById({element_id!r}).innerText")
        return str(result.get("result", {}).get("value") or "")

    async def screenshot(self, path: Path) -> Path:
        data = (await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True))["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@asynccontextmanager
async def open_page(profile: Path) -> AsyncIterator[Page]:
    """A fresh chromium (its own --user-data-dir) with one page whose console is being watched."""
    binary = chromium()
    assert binary is not None
    proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        port = None
        for _ in range(200):
            line = await asyncio.to_thread(proc.stderr.readline)
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                port = int(found.group(1))
                break
            if not line and proc.poll() is not None:
                break
        assert port is not None, "chromium did not start its DevTools endpoint"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = await resp.json()
            target = next(t for t in targets if t.get("type") == "page")
            async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=64 * 2**20) as ws:
                page = Page(ws)
                for domain in ("Page", "Runtime", "Log"):
                    await page.call(f"{domain}.enable")
                yield page
                page._reader.cancel()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
