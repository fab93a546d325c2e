"""Admission latency and throughput of the webhook over TLS on loopback, for a realistic 3-task Job.

The server (the real `assembly.serve` webhook component: aiohttp + TLS + metrics, queues from memory) runs in
its own process pinned to CPU 0. The load generator runs pinned to CPU 1 and keeps its connections alive, as
kube-apiserver does: by default a small Go program (net/http + crypto/tls, i.e. the apiserver's own client
stack, built on the fly with the system's `go`); `--client python` uses raw asyncio TLS connections instead.

* latency: one connection, requests one after another (what one apiserver request waits for);
* throughput: C concurrent connections for a fixed time; the server's CPU use shows whether its one core
  was the limit.

Run: .venv/bin/python bench/admission.py [--requests 5000] [--seconds 8] [--connections 1 4 16] [--client go|python]
"""

from __future__ import annotations

import sys
from pathlib import Path

# This script shares its name with the `webhook` package: keep bench/ off the import path, the repository on it,
# before anything else is imported (hence the file-wide E402 exemption).
# ruff: noqa: E402
_HERE = Path(__file__).resolve().parent
sys.path[:] = [str(_HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import argparse
import asyncio
import base64
import multiprocessing as mp
import os
import platform
import shutil
import ssl
import statistics
import subprocess
import tempfile
import time

import aiohttp
import jsonpatch
import orjson
from prometheus_client import CollectorRegistry

from assembly.serve.settings import WebhookSettings
from assembly.serve.webhook import WebhookServer
from tests.service.reviews import queue, review, training_job
from webhook.certs import generate, service_hosts, write_bundle
from webhook.context import AdmissionContext
from webhook.listers import MemoryQueues

SERVER_CPU, CLIENT_CPU = 0, 1

# The load generator kube-apiserver would be: Go's net/http client with keep-alive over crypto/tls.
GO_CLIENT = r"""
package main

import (
	"bytes"; "crypto/tls"; "crypto/x509"; "encoding/json"; "flag"; "io"; "net/http"; "os"; "sync"; "time"
)

func main() {
	url := flag.String("url", "", ""); caFile := flag.String("ca", "", ""); bodyFile := flag.String("body", "", "")
	n := flag.Int("n", 0, "sequential requests (latency mode)"); conns := flag.Int("c", 1, "")
	secs := flag.Float64("s", 5, "duration (throughput mode)")
	flag.Parse()
	ca, _ := os.ReadFile(*caFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	body, _ := os.ReadFile(*bodyFile)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"},
		MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns}
	client := &http.Client{Transport: tr}
	call := func() time.Duration {
		t := time.Now()
		resp, err := client.Post(*url, "application/json", bytes.NewReader(body))
		if err != nil { panic(err) }
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 { panic(resp.Status) }
		return time.Since(t)
	}
	for i := 0; i < 500; i++ { call() }
	out := map[string]interface{}{}
	if *n > 0 {
		samples := make([]float64, *n)
		for i := range samples { samples[i] = call().Seconds() }
		out["samples"] = samples
	} else {
		var wg sync.WaitGroup
		var mu sync.Mutex
		count := 0
		deadline := time.Now().Add(time.Duration(*secs * float64(time.Second)))
		start := time.Now()
		for c := 0; c < *conns; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := 0
				for time.Now().Before(deadline) { call(); local++ }
				mu.Lock(); count += local; mu.Unlock()
			}()
		}
		wg.Wait()
		out["count"] = count
		out["seconds"] = time.Since(start).Seconds()
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
"""


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > cpu:
        os.sched_setaffinity(0, {cpu})


def run_server(cert_dir: str, ready: mp.Queue) -> None:
    pin(SERVER_CPU)

    async def main() -> None:
        settings = WebhookSettings(
            host="127.0.0.1",
            port=0,
            tls_cert_file=Path(cert_dir, "tls.crt"),
            tls_key_file=Path(cert_dir, "tls.key"),
        )
        queues = MemoryQueues([queue("default"), queue("root"), queue("ml-training")])
        server = WebhookServer(settings, AdmissionContext(queues=queues), CollectorRegistry())
        await server.start()
        ready.put(server.port)
        await asyncio.Event().wait()

    asyncio.run(main())


def bodies() -> dict[str, bytes]:
    """The reviews the apiserver sends for one `kubectl create` of the training job: mutate, then validate."""
    from webhook.jobs import mutate_job
    from webhook.review import AdmissionReview

    raw = training_job()
    mutate = review(raw, uid="bench-mutate")
    outcome = mutate_job(AdmissionReview.model_validate(mutate).request, AdmissionContext())
    defaulted = jsonpatch.apply_patch(raw, list(outcome.patch))
    validate = review(defaulted, uid="bench-validate")
    return {"/jobs/mutate": orjson.dumps(mutate), "/jobs/validate": orjson.dumps(validate)}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class GoClient:
    """Runs the Go load generator; builds it once into `workdir`."""

    def __init__(self, port: int, ca_file: Path, workdir: Path) -> None:
        self.base = f"https://localhost:{port}"
        self.ca_file = ca_file
        self.workdir = workdir
        (workdir / "main.go").write_text(GO_CLIENT)
        env = {**os.environ, "GO111MODULE": "off", "GOCACHE": str(workdir / "gocache")}
        subprocess.run(["go", "build", "-o", str(workdir / "loadgen"), str(workdir / "main.go")], check=True, env=env)

    def _run(self, path: str, body: bytes, *args: str) -> dict:
        body_file = self.workdir / "body.json"
        body_file.write_bytes(body)
        argv = [
            str(self.workdir / "loadgen"),
            "-url",
            f"{self.base}{path}?timeout=10s",
            "-ca",
            str(self.ca_file),
            "-body",
            str(body_file),
            *args,
        ]
        return orjson.loads(subprocess.run(argv, check=True, capture_output=True).stdout)

    def latency(self, path: str, body: bytes, n: int) -> list[float]:
        return self._run(path, body, "-n", str(n))["samples"]

    def throughput(self, path: str, body: bytes, conns: int, seconds: float) -> float:
        out = self._run(path, body, "-c", str(conns), "-s", str(seconds))
        return out["count"] / out["seconds"]


class PyConnection:
    """One keep-alive TLS connection sending pre-built HTTP/1.1 requests (no client library in the way)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, tls: ssl.SSLContext) -> PyConnection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls, server_hostname="localhost")
        return cls(reader, writer)

    async def call(self, request: bytes) -> bytes:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head.decode(errors="replace"))
        length = next(int(h[15:]) for h in head.split(b"\r\n") if h[:15].lower() == b"content-length:")
        return await self.reader.readexactly(length)


def request_bytes(path: str, body: bytes) -> bytes:
    head = (
        f"POST {path}?timeout=10s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class PyClient:
    def __init__(self, port: int, ca_pem: bytes) -> None:
        self.port = port
        self.tls = ssl.create_default_context(cadata=ca_pem.decode())

    def latency(self, path: str, body: bytes, n: int) -> list[float]:
        async def run() -> list[float]:
            conn = await PyConnection.open(self.port, self.tls)
            request = request_bytes(path, body)
            for _ in range(500):
                await conn.call(request)
            samples = []
            for _ in range(n):
                started = time.perf_counter()
                await conn.call(request)
                samples.append(time.perf_counter() - started)
            conn.writer.close()
            return samples

        return asyncio.run(run())

    def throughput(self, path: str, body: bytes, conns: int, seconds: float) -> float:
        async def run() -> float:
            pool = [await PyConnection.open(self.port, self.tls) for _ in range(conns)]
            request = request_bytes(path, body)
            count, deadline = 0, time.perf_counter() + seconds

            async def drive(conn: PyConnection) -> None:
                nonlocal count
                while time.perf_counter() < deadline:
                    await conn.call(request)
                    count += 1

            started = time.perf_counter()
            await asyncio.gather(*(drive(c) for c in pool))
            for c in pool:
                c.writer.close()
            return count / (time.perf_counter() - started)

        return asyncio.run(run())


def handshake_ms(port: int, ca_pem: bytes, n: int = 200) -> float:
    """Median time to open a new TLS connection (what a request pays when the apiserver has none idle)."""
    tls = ssl.create_default_context(cadata=ca_pem.decode())

    async def run() -> float:
        samples = []
        for _ in range(n):
            started = time.perf_counter()
            conn = await PyConnection.open(port, tls)
            samples.append(time.perf_counter() - started)
            conn.writer.close()
        return statistics.median(samples) * 1000

    return asyncio.run(run())


def check(port: int, ca_pem: bytes, payloads: dict[str, bytes]) -> None:
    """Every measured review is admitted, and the mutation really defaults the job."""

    async def run() -> None:
        conn = await PyConnection.open(port, ssl.create_default_context(cadata=ca_pem.decode()))
        for path, body in payloads.items():
            response = orjson.loads(await conn.call(request_bytes(path, body)))["response"]
            assert response["allowed"] is True, response
            if path.endswith("/mutate"):
                assert orjson.loads(base64.b64decode(response["patch"])), "the training job must get defaults"
        conn.writer.close()

    asyncio.run(run())


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def measure(client: GoClient | PyClient, args: argparse.Namespace, server_pid: int, payloads: dict[str, bytes]) -> None:
    print("\n| path | p50 | p90 | p99 | max | sequential reviews/s |")
    print("|---|---|---|---|---|---|")
    for path, body in payloads.items():
        s = client.latency(path, body, args.requests)
        print(
            f"| {path} | {pct(s, 0.5):.3f} ms | {pct(s, 0.9):.3f} ms | {pct(s, 0.99):.3f} ms | "
            f"{max(s) * 1000:.2f} ms | {len(s) / sum(s):,.0f} |"
        )
    print("\n| path | connections | reviews/s | server CPU (share of its one core) |")
    print("|---|---|---|---|")
    for path, body in payloads.items():
        for c in args.connections:
            cpu0, wall0 = cpu_seconds(server_pid), time.perf_counter()
            rate = client.throughput(path, body, c, args.seconds)
            cpu = (cpu_seconds(server_pid) - cpu0) / (time.perf_counter() - wall0)
            print(f"| {path} | {c} | {rate:,.0f} | {cpu:.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="sequential requests per path (latency)")
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of each throughput run")
    parser.add_argument("--connections", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--client", choices=["go", "python"], default="go" if shutil.which("go") else "python")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        bundle = generate(service_hosts("lapilli-webhook", "lapilli-system"))
        paths = write_bundle(bundle, workdir / "tls")
        spawn = mp.get_context("spawn")
        ready: mp.Queue = spawn.Queue()
        server = spawn.Process(target=run_server, args=(str(workdir / "tls"), ready), daemon=True)
        server.start()
        try:
            port = ready.get(timeout=30)
            pin(CLIENT_CPU)
            payloads = bodies()
            check(port, bundle.ca_cert, payloads)
            client = GoClient(port, paths["ca.crt"], workdir) if args.client == "go" else PyClient(port, bundle.ca_cert)
            machine = platform.processor() or platform.machine()
            print(
                f"Python {platform.python_version()}, aiohttp {aiohttp.__version__}, {machine}; server on CPU "
                f"{SERVER_CPU}, {args.client} client on CPU {CLIENT_CPU}"
            )
            print("review sizes: " + ", ".join(f"{p} {len(b):,} B" for p, b in payloads.items()))
            print(f"new TLS connection (handshake, median): {handshake_ms(port, bundle.ca_cert):.2f} ms")
            measure(client, args, server.pid or 0, payloads)
        finally:
            server.terminate()
            server.join()


if __name__ == "__main__":
    main()
