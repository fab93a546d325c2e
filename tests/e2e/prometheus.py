"""A real Prometheus server (Debian's `prometheus` package) for the tests that read one: installed when missing
(`make test` does it first, as for chromium), started on a free loopback port scraping the given targets every
second, and stopped when the test is done."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import yaml

from assembly.dev.ports import free_ports

INSTALL = "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus"


def prometheus_binary() -> str:
    """Debian's prometheus, installed first if it is missing; fails the test with the reason if it cannot be."""
    found = shutil.which("prometheus")
    if found is None:
        done = subprocess.run(["bash", "-c", INSTALL], capture_output=True, text=True, check=False)
        found = shutil.which("prometheus")
        if found is None:
            raise AssertionError(f"Prometheus is missing and could not be installed ({INSTALL}): "
                                 f"{(done.stderr or done.stdout).strip()[-400:]}")
    return found


@asynccontextmanager
async def running_prometheus(workdir: Path, targets: Sequence[str], port: int | None = None) -> AsyncIterator[str]:
    """Prometheus scraping `targets` (host:port, path /metrics) every second, keeping their labels as they are (the
    DCGM exporter's `namespace`/`pod`: honor_labels); yields its URL once it is ready."""
    binary = prometheus_binary()
    port = port or free_ports(1)[0]
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "dcgm", "honor_labels": True, "static_configs": [{"targets": list(targets)}]}],
    }))
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                if proc.poll() is not None:
                    raise AssertionError(f"prometheus exited: {(workdir / 'prometheus.log').read_text()[-2000:]}")
                try:
                    async with http.get(f"{url}/-/ready") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("prometheus did not become ready within 60 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
