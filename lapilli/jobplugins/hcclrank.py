"""The `hcclrank` job plugin (`pkg/controllers/job/plugins/distributed-framework/hcclrank`): HCCL rank annotation.

Sets pod annotation `hccl/rankIndex` unless present: the value of a container's `RANK` env if one has it
(so it follows the pytorch plugin, which runs before it), else `i` on master pod `i` and
`<master replicas> + i` on worker pod `i`; pods of other tasks are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.flags import parse_flags
from lapilli.jobplugins.naming import JobShape
from lapilli.jobplugins.podspec import containers

NAME: Final = "hcclrank"
RANK_KEY: Final = "hccl/rankIndex"
FLAGS: Final = {"master": "master", "worker": "worker"}


def _rank_env(pod: dict[str, Any]) -> str:
    for container in containers(pod, init=False):
        for env in container.get("env") or []:
            if isinstance(env, dict) and env.get("name") == "RANK" and env.get("value"):
                return str(env["value"])
    return ""


@dataclass(frozen=True, slots=True)
class HcclRankPlugin:
    master: str = "master"
    worker: str = "worker"
    error: str = ""
    name: str = NAME

    @classmethod
    def build(cls, args: Sequence[object]) -> HcclRankPlugin:
        f = parse_flags(args, FLAGS)
        return cls(master=f.text("master"), worker=f.text("worker"), error=f.error)

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        if isinstance(annotations, dict) and annotations.get(RANK_KEY):
            return
        rank = _rank_env(pod)
        if not rank and ctx.task == self.master:
            rank = str(ctx.index)
        elif not rank and ctx.task == self.worker:
            master = ctx.job.task(self.master)
            rank = str((master.replicas if master else 0) + ctx.index)
        if not rank:
            return
        if not isinstance(meta, dict):
            meta = pod["metadata"] = {}
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[RANK_KEY] = rank

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        return []
