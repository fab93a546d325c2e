"""The `svc` job plugin (`pkg/controllers/job/plugins/svc`): stable DNS names for every replica.

* pod: `hostname` := pod name and `subdomain` := job name unless the template sets them; the ConfigMap
  `<job>-svc` mounted whole at `/etc/volcano` in every container and init container; with
  `--inject-hosts-env` (default true) env `VC_<TASK>_HOSTS` / `VC_<TASK>_NUM` for **every** task, read from
  that ConfigMap through `configMapKeyRef`;
* objects: headless Service `<job>` selecting the Job's pods (one placeholder port, as Volcano), the
  ConfigMap (`<task>.host` newline-joined, `VC_<TASK>_HOSTS` comma-joined, `VC_<TASK>_NUM`) and, unless
  `--disable-network-policy`, a NetworkPolicy `<job>` admitting ingress only from the Job's own pods.
Task names are turned into keys with `-` → `_` (upper-cased in env names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from lapilli.api.constants import JOB_NAME_KEY, JOB_NAMESPACE_KEY
from lapilli.jobplugins.base import PodContext
from lapilli.jobplugins.flags import parse_flags
from lapilli.jobplugins.naming import JobShape, env_key, object_meta, task_hosts
from lapilli.jobplugins.podspec import add_env_from_configmap, add_mount, add_volume, containers, pod_spec, set_if_empty

NAME: Final = "svc"
MOUNT_PATH: Final = "/etc/volcano"
FLAGS: Final = {"publish-not-ready-addresses": False, "disable-network-policy": False, "inject-hosts-env": True}


def configmap_name(job_name: str) -> str:
    return f"{job_name}-{NAME}"


def hosts_env(task_name: str) -> str:
    return f"VC_{env_key(task_name).upper()}_HOSTS"


def num_env(task_name: str) -> str:
    return f"VC_{env_key(task_name).upper()}_NUM"


def hosts_data(job: JobShape) -> dict[str, str]:
    """`GenerateHosts`: the ConfigMap data for the Job's current replicas."""
    data: dict[str, str] = {}
    for task in job.tasks:
        hosts = task_hosts(job, task)
        data[f"{env_key(task.name)}.host"] = "\n".join(hosts)
        data[hosts_env(task.name)] = ",".join(hosts)
        data[num_env(task.name)] = str(len(hosts))
    return data


def _selector(job: JobShape) -> dict[str, str]:
    return {JOB_NAME_KEY: job.name, JOB_NAMESPACE_KEY: job.namespace}


@dataclass(frozen=True, slots=True)
class SvcPlugin:
    publish_not_ready: bool = False
    network_policy: bool = True
    inject_hosts_env: bool = True
    error: str = ""
    name: str = NAME

    @classmethod
    def build(cls, args: Sequence[object]) -> SvcPlugin:
        flags = parse_flags(args, FLAGS)
        return cls(
            publish_not_ready=flags.switch("publish-not-ready-addresses"),
            network_policy=not flags.switch("disable-network-policy"),
            inject_hosts_env=flags.switch("inject-hosts-env"),
            error=flags.error,
        )

    def on_pod(self, ctx: PodContext, pod: dict[str, Any]) -> None:
        spec = pod_spec(pod)
        set_if_empty(spec, "hostname", ctx.pod_name)
        set_if_empty(spec, "subdomain", ctx.job.name)
        cm = configmap_name(ctx.job.name)
        add_volume(pod, {"name": cm, "configMap": {"name": cm}})
        for container in containers(pod):
            if self.inject_hosts_env:
                for task in ctx.job.tasks:
                    add_env_from_configmap(container, hosts_env(task.name), cm, hosts_env(task.name))
                    add_env_from_configmap(container, num_env(task.name), cm, num_env(task.name))
            add_mount(container, {"name": cm, "mountPath": MOUNT_PATH})

    def resources(self, job: JobShape) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": object_meta(job, job.name),
                "spec": {
                    "clusterIP": "None",
                    "selector": _selector(job),
                    "publishNotReadyAddresses": self.publish_not_ready,
                    "ports": [{"name": "placeholder-volcano", "port": 1, "protocol": "TCP", "targetPort": 1}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(job, configmap_name(job.name)),
                "data": hosts_data(job),
            },
        ]
        if self.network_policy:
            out.append(
                {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": object_meta(job, job.name),
                    "spec": {
                        "podSelector": {"matchLabels": _selector(job)},
                        "ingress": [{"from": [{"podSelector": {"matchLabels": _selector(job)}}]}],
                        "policyTypes": ["Ingress"],
                    },
                }
            )
        return out
