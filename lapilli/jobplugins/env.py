"""The `env` job plugin (`pkg/controllers/job/plugins/env`): the replica index as environment variables.

Every container and init container gets `VK_TASK_INDEX=<i>` (legacy name) and `VC_TASK_INDEX=<i>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.naming import JobShape
from lapilli.jobplugins.podspec import add_env, containers

NAME: Final = "env"
TASK_INDEX_ENVS: Final = ("VK_TASK_INDEX", "VC_TASK_INDEX")


@dataclass(frozen=True, slots=True)
class EnvPlugin:
    name: str = NAME
    error: str = ""

    @classmethod
    def build(cls, args: Sequence[object]) -> EnvPlugin:
        return cls()  # Volcano's env plugin takes no flags and ignores its arguments

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        for container in containers(pod):
            for env in TASK_INDEX_ENVS:
                add_env(container, env, str(ctx.index))

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        return []
