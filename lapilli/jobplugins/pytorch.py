"""The `pytorch` job plugin (`pkg/controllers/job/plugins/distributed-framework/pytorch`): torch.distributed env.

When the master task (`--master`, default `master`) exists, every container of every pod gets
`MASTER_ADDR=<host of master replica 0>`, `MASTER_PORT=<--port, 23456>`,
`WORLD_SIZE=<master replicas + worker replicas>`, and `RANK` — 0 on master pods, `i+1` on worker `i`; a
container port `pytorchjob-port` is added unless the container already exposes that port. With
`--wait-master-enabled`, worker pods get an init container `wait-for-master` (image `--wait-master-image`)
that polls the master port for up to `--wait-master-timeout` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.flags import FlagValue, parse_flags
from lapilli.jobplugins.naming import JobShape, task_host
from lapilli.jobplugins.podspec import add_env, add_port, containers, pod_spec

NAME: Final = "pytorch"
PORT_NAME: Final = "pytorchjob-port"
WAIT_CONTAINER: Final = "wait-for-master"
FLAGS: Final[Mapping[str, FlagValue]] = {
    "master": "master",
    "worker": "worker",
    "port": 23456,
    "wait-master-enabled": False,
    "wait-master-timeout": 300,
    "wait-master-image": "busybox:1.36.1",
}


@dataclass(frozen=True, slots=True)
class PytorchPlugin:
    master: str = "master"
    worker: str = "worker"
    port: int = 23456
    wait_master: bool = False
    wait_timeout: int = 300
    wait_image: str = "busybox:1.36.1"
    error: str = ""
    name: str = NAME

    @classmethod
    def build(cls, args: Sequence[object]) -> PytorchPlugin:
        f = parse_flags(args, FLAGS)
        return cls(
            master=f.text("master"),
            worker=f.text("worker"),
            port=f.number("port"),
            wait_master=f.switch("wait-master-enabled"),
            wait_timeout=f.number("wait-master-timeout"),
            wait_image=f.text("wait-master-image"),
            error=f.error,
        )

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        master = ctx.job.task(self.master)
        if master is None:
            return  # Volcano logs "job doesn't have task master" and leaves the pod alone
        worker = ctx.job.task(self.worker)
        addr = task_host(ctx.job, master, 0)
        world = master.replicas + (worker.replicas if worker else 0)
        rank = {self.master: 0, self.worker: ctx.index + 1}.get(ctx.task)
        for container in containers(pod, init=False):
            add_port(container, PORT_NAME, self.port)
            add_env(container, "MASTER_ADDR", addr)
            add_env(container, "MASTER_PORT", str(self.port))
            add_env(container, "WORLD_SIZE", str(world))
            if rank is not None:
                add_env(container, "RANK", str(rank))
        if self.wait_master and ctx.task == self.worker:
            self._add_wait(pod, addr)

    def _add_wait(self, pod: dict[str, Any], addr: str) -> None:
        spec = pod_spec(pod)
        inits = spec.get("initContainers")
        if not isinstance(inits, list):
            inits = spec["initContainers"] = []
        if any(isinstance(c, dict) and c.get("name") == WAIT_CONTAINER for c in inits):
            return
        poll = f"until nc -z -w 2 {addr} {self.port}; do echo waiting for {addr}:{self.port}; sleep 2; done"
        command = ["sh", "-c", f"timeout {self.wait_timeout} sh -c '{poll}'"]
        inits.insert(0, {"name": WAIT_CONTAINER, "image": self.wait_image, "command": command})

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        return []
