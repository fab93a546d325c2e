"""Volcano's job plugins as pure functions (kernel): what each gives a Job's pods and which objects it needs.

Shared by the webhook's pod mutator (pods of a Volcano Job that lack the env) and the job controller (when it
renders pods), so both produce the same pods. Nothing here does I/O. Counterpart:
`pkg/controllers/job/plugins/**` in Volcano.

* `apply_plugins(job, task_name, index, pod) -> pod'` — a mutated copy; idempotent.
* `job_resources(job, ssh_keypair=None) -> [manifest, ...]` — Service / ConfigMap / Secret / NetworkPolicy.
* `implied_plugins(plugins)` — what the job mutator adds (pytorch/mpi/tensorflow/ray ⇒ svc, mpi ⇒ ssh).
* `KNOWN_PLUGINS`, `plugin_errors(job)`, `make_pod_name`, `generate_keypair`, `parse_flags`.
"""

from lapilli.jobplugins.flags import ParsedFlags, parse_flags
from lapilli.jobplugins.naming import JobShape, TaskShape, job_shape, make_pod_name, task_host, task_hosts
from lapilli.jobplugins.registry import (
    KNOWN_PLUGINS,
    apply_plugins,
    build_plugins,
    implied_plugins,
    job_resources,
    plugin_errors,
)
from lapilli.jobplugins.ssh import SSHKeyPair, generate_keypair

__all__ = [
    "KNOWN_PLUGINS",
    "JobShape",
    "ParsedFlags",
    "SSHKeyPair",
    "TaskShape",
    "apply_plugins",
    "build_plugins",
    "generate_keypair",
    "implied_plugins",
    "job_resources",
    "job_shape",
    "make_pod_name",
    "parse_flags",
    "plugin_errors",
    "task_host",
    "task_hosts",
]
