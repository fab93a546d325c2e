"""Every job plugin Lapilli knows, in the one fixed order they run, and the three entry points callers use.

Volcano runs a Job's plugins in Go map order (random); Lapilli fixes it so pods render the same every time:
env, svc, ssh, pytorch, mpi, tensorflow, ray, hcclrank (hcclrank after pytorch, whose `RANK` it reads).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from lapilli.jobplugins.base import JobPlugin, PodContext
from lapilli.jobplugins.env import EnvPlugin
from lapilli.jobplugins.hcclrank import HcclRankPlugin
from lapilli.jobplugins.mpi import MpiPlugin
from lapilli.jobplugins.naming import job_shape, make_pod_name
from lapilli.jobplugins.pytorch import PytorchPlugin
from lapilli.jobplugins.ray import RayPlugin
from lapilli.jobplugins.ssh import SSHKeyPair, SshPlugin
from lapilli.jobplugins.svc import SvcPlugin
from lapilli.jobplugins.tensorflow import TensorflowPlugin
from lapilli.meta import name_of

_BUILDERS: Final[dict[str, Callable[[Sequence[object]], JobPlugin]]] = {
    "env": EnvPlugin.build,
    "svc": SvcPlugin.build,
    "ssh": SshPlugin.build,
    "pytorch": PytorchPlugin.build,
    "mpi": MpiPlugin.build,
    "tensorflow": TensorflowPlugin.build,
    "ray": RayPlugin.build,
    "hcclrank": HcclRankPlugin.build,
}

KNOWN_PLUGINS: Final = frozenset(_BUILDERS)
"""Plugin names a Job may use (Volcano's `GetPluginBuilder` set); any other name fails validation."""

# Distributed-framework plugins that need stable per-replica DNS names (svc), and mpi's password-less ssh.
_NEEDS_SVC: Final = ("tensorflow", "mpi", "pytorch", "ray")


def build_plugins(plugins: Mapping[str, Sequence[object]]) -> list[JobPlugin]:
    """The Job's known plugins, built from their arguments, in run order; unknown names are skipped."""
    return [build(plugins[name]) for name, build in _BUILDERS.items() if name in plugins]


def implied_plugins(plugins: Mapping[str, Sequence[object]]) -> dict[str, list[object]]:
    """Plugins the mutating webhook adds: `svc` for tensorflow/mpi/pytorch/ray, `ssh` for mpi (empty args)."""
    added: dict[str, list[object]] = {}
    if any(name in plugins for name in _NEEDS_SVC) and "svc" not in plugins:
        added["svc"] = []
    if "mpi" in plugins and "ssh" not in plugins:
        added["ssh"] = []
    return added


def plugin_errors(job: Mapping[str, Any]) -> dict[str, str]:
    """Argument-parse errors per plugin (Volcano only logs these; the job mutator returns them as warnings)."""
    shape = job_shape(job)
    return {p.name: p.error for p in build_plugins(shape.plugins) if p.error}


def apply_plugins(job: Mapping[str, Any], task_name: str, index: int, pod: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `pod` (replica `index` of task `task_name` of `job`) with what the Job's plugins give it.

    Idempotent: applying twice equals applying once, and whatever the pod already has (an env var of the same
    name, a port of the same number, a volume of the same name, a mount at the same path, a hostname) stays.
    """
    shape = job_shape(job)
    out = copy.deepcopy(dict(pod))
    ctx = PodContext(shape, task_name, index, name_of(out) or make_pod_name(shape.name, task_name, index))
    for plugin in build_plugins(shape.plugins):
        plugin.on_pod(ctx, out)
    return out


def job_resources(job: Mapping[str, Any], *, ssh_keypair: SSHKeyPair | None = None) -> list[dict[str, Any]]:
    """The Services, ConfigMaps, Secrets and NetworkPolicies the Job's plugins need, first plugin winning a name.

    `ssh_keypair` is reused for the ssh Secret (pass the existing one: Volcano never rotates it); without it
    a fresh pair is generated unless `--ssh-private-key` was given.
    """
    shape = job_shape(job)
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for plugin in build_plugins(shape.plugins):
        if isinstance(plugin, SshPlugin):
            plugin = plugin.with_keypair(ssh_keypair)
        for obj in plugin.resources(shape):
            key = (obj["kind"], name_of(obj))
            if key not in seen:
                seen.add(key)
                out.append(obj)
    return out
