"""The `mpi` job plugin (`pkg/controllers/job/plugins/distributed-framework/mpi`): hosts for `mpiexec`.

Pods of the master task (`--master`, default `master`) get `MPI_HOST=<comma-joined hosts of the worker task>`
in every container and init container; every container and init container of every pod exposes
`--port` (default 22, sshd) as `mpijob-port` unless it already exposes that port. The job mutator adds the
`svc` and `ssh` plugins an MPI job relies on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.flags import FlagValue, parse_flags
from lapilli.jobplugins.naming import JobShape, task_hosts
from lapilli.jobplugins.podspec import add_env, add_port, containers

NAME: Final = "mpi"
PORT_NAME: Final = "mpijob-port"
HOST_ENV: Final = "MPI_HOST"
FLAGS: Final[Mapping[str, FlagValue]] = {"master": "master", "worker": "worker", "port": 22}


@dataclass(frozen=True, slots=True)
class MpiPlugin:
    master: str = "master"
    worker: str = "worker"
    port: int = 22
    error: str = ""
    name: str = NAME

    @classmethod
    def build(cls, args: Sequence[object]) -> MpiPlugin:
        f = parse_flags(args, FLAGS)
        return cls(master=f.text("master"), worker=f.text("worker"), port=f.number("port"), error=f.error)

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        hosts: str | None = None
        if ctx.task == self.master:
            worker = ctx.job.task(self.worker)
            # Volcano indexes the worker task blindly; the validating webhook guarantees it exists.
            hosts = ",".join(task_hosts(ctx.job, worker)) if worker else ""
        for container in containers(pod):
            add_port(container, PORT_NAME, self.port)
            if hosts is not None:
                add_env(container, HOST_ENV, hosts)

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        return []
