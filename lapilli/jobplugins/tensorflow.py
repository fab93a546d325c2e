"""The `tensorflow` job plugin (`pkg/controllers/job/plugins/distributed-framework/tensorflow`): `TF_CONFIG`.

Unless the Job is a single task with one replica, every container gets `TF_CONFIG`, compact JSON
`{"cluster": {"ps": [...], "worker": [...], "chief": [...], "evaluator": [...]}, "task": {"type": T, "index": i}}`
where each list holds `<host>:<--port, 2222>` for every replica of the task named by `--ps`, `--worker`,
`--chief`, `--evaluator` (empty lists are left out) and `T` is this pod's role (its task name otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.flags import FlagValue, parse_flags
from lapilli.jobplugins.naming import JobShape, task_host
from lapilli.jobplugins.podspec import add_env, containers

NAME: Final = "tensorflow"
ENV: Final = "TF_CONFIG"
ROLES: Final = ("ps", "worker", "chief", "evaluator")
TYPE_ORDER: Final = ("chief", "worker", "ps", "evaluator")
FLAGS: Final[Mapping[str, FlagValue]] = {
    "ps": "ps", "worker": "worker", "chief": "chief", "evaluator": "evaluator", "port": 2222,
}


@dataclass(frozen=True, slots=True)
class TensorflowPlugin:
    role_tasks: tuple[tuple[str, str], ...] = tuple((r, r) for r in ROLES)  # (role, task name)
    port: int = 2222
    error: str = ""
    name: str = NAME

    @classmethod
    def build(cls, args: Sequence[object]) -> TensorflowPlugin:
        f = parse_flags(args, FLAGS)
        return cls(role_tasks=tuple((r, f.text(r)) for r in ROLES), port=f.number("port"), error=f.error)

    def tf_config(self, ctx: PodContext) -> str:
        cluster: dict[str, list[str]] = {}
        used: set[str] = set()
        for role, task_name in self.role_tasks:
            # Go's switch takes the first role whose task name matches: a task feeds one role only.
            task = ctx.job.task(task_name)
            if task is None or task_name in used:
                continue
            used.add(task_name)
            hosts = [f"{task_host(ctx.job, task, i)}:{self.port}" for i in range(task.replicas)]
            if hosts:
                cluster[role] = hosts
        names = dict(self.role_tasks)
        # `getTaskType` tests chief, worker, ps, evaluator in that order; an unnamed role is the task name.
        role = next((r for r in TYPE_ORDER if names[r] == ctx.task), ctx.task)
        return json.dumps({"cluster": cluster, "task": {"type": role, "index": ctx.index}}, separators=(",", ":"))

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        tasks = ctx.job.tasks
        if len(tasks) == 1 and tasks[0].replicas == 1:
            return  # stand-alone training needs no cluster spec
        value = self.tf_config(ctx)
        for container in containers(pod, init=False):
            add_env(container, ENV, value)

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        return []
