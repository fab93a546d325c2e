"""The `ray` job plugin (`pkg/controllers/job/plugins/distributed-framework/ray`): a Ray cluster per Job.

The container named `--headContainer` (default `head`) in pods of the head task (`--head`, default `head`) runs
`ray start --head --block --dashboard-host=0.0.0.0 --port=P --dashboard-port=D --ray-client-server-port=C` and
exposes ports `gcs`, `dashboard`, `client-server`; the container `--workerContainer` in worker pods runs
`ray start --block --address=<head host>:P`. Object: Service `<job>` on the head pods with those three ports.

Volcano's svc plugin (which the job mutator adds for ray) also wants a Service named `<job>` — the headless one
that gives every replica its DNS name. Volcano lets whichever plugin runs first win (Go map order);
`job_resources` keeps the headless one, since the head address `<job>-head-0.<job>` only resolves through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lapilli.api.constants import JOB_NAME_KEY, JOB_NAMESPACE_KEY, TASK_SPEC_KEY
from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.flags import FlagValue, parse_flags
from lapilli.jobplugins.naming import JobShape, object_meta, task_host
from lapilli.jobplugins.podspec import add_port, containers

NAME: Final = "ray"
FLAGS: Final[Mapping[str, FlagValue]] = {
    "head": "head",
    "headContainer": "head",
    "worker": "worker",
    "workerContainer": "worker",
    "port": 6379,
    "dashboardPort": 8265,
    "clientPort": 10001,
}


@dataclass(frozen=True, slots=True)
class RayPlugin:
    head: str = "head"
    head_container: str = "head"
    worker: str = "worker"
    worker_container: str = "worker"
    port: int = 6379
    dashboard_port: int = 8265
    client_port: int = 10001
    error: str = ""
    name: str = NAME

    @classmethod
    def build(cls, args: Sequence[object]) -> RayPlugin:
        f = parse_flags(args, FLAGS)
        return cls(
            head=f.text("head"),
            head_container=f.text("headContainer"),
            worker=f.text("worker"),
            worker_container=f.text("workerContainer"),
            port=f.number("port"),
            dashboard_port=f.number("dashboardPort"),
            client_port=f.number("clientPort"),
            error=f.error,
        )

    def _ports(self) -> tuple[tuple[str, int], ...]:
        return (("gcs", self.port), ("dashboard", self.dashboard_port), ("client-server", self.client_port))

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        head = ctx.job.task(self.head)
        if head is None:
            return  # Volcano fails pod creation here; the pod mutator must not, so it leaves the pod alone
        head_cmd = (
            f"ray start --head --block --dashboard-host=0.0.0.0 --port={self.port} "
            f"--dashboard-port={self.dashboard_port} --ray-client-server-port={self.client_port}"
        )
        worker_cmd = f"ray start --block --address={task_host(ctx.job, head, 0)}:{self.port}"
        for container in containers(pod, init=False):
            if ctx.task == self.head and container.get("name") == self.head_container:
                for port_name, port in self._ports():
                    add_port(container, port_name, port)
                container["command"] = ["sh", "-c", head_cmd]
            elif ctx.task == self.worker and container.get("name") == self.worker_container:
                container["command"] = ["sh", "-c", worker_cmd]

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        ports = [{"name": n, "port": p, "targetPort": n, "protocol": "TCP"} for n, p in self._ports()]
        selector = {JOB_NAME_KEY: job.name, JOB_NAMESPACE_KEY: job.namespace, TASK_SPEC_KEY: self.head}
        return [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": object_meta(job, job.name),
                "spec": {"selector": selector, "ports": ports},
            }
        ]
