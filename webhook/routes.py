"""The admission endpoints: path, webhook name, the resource and operations it reviews, and its rule.

One table drives the HTTP routes (`webhook.server`) and the rendered Mutating/ValidatingWebhookConfigurations
(`webhook.configs`), so a path, its rule and its registration cannot drift apart. Names and paths are Volcano's
(`mutatejob.volcano.sh` at `/jobs/mutate`, ...), so messages read exactly as they do under Volcano.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from webhook.context import AdmissionContext
from webhook.hypernodes import validate_hypernode
from webhook.jobs import mutate_job, validate_job
from webhook.outcome import Outcome
from webhook.podgroups import mutate_podgroup, validate_podgroup
from webhook.pods import mutate_pod, validate_pod
from webhook.queues import mutate_queue, validate_queue
from webhook.review import AdmissionRequest

Rule = Callable[[AdmissionRequest, AdmissionContext], Outcome]


@dataclass(frozen=True, slots=True)
class Target:
    """A reviewed resource type."""

    group: str
    version: str
    resource: str
    kind: str
    cluster_scoped: bool = False


@dataclass(frozen=True, slots=True)
class Route:
    path: str
    name: str
    """The webhook name kubectl prints: `admission webhook "<name>" denied the request: ...`."""
    target: Target
    operations: tuple[str, ...]
    rule: Rule

    @property
    def mutating(self) -> bool:
        return self.path.endswith("/mutate")


JOBS: Final = Target("batch.volcano.sh", "v1alpha1", "jobs", "Job")
QUEUES: Final = Target("scheduling.volcano.sh", "v1beta1", "queues", "Queue", cluster_scoped=True)
PODGROUPS: Final = Target("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
PODS: Final = Target("", "v1", "pods", "Pod")
HYPERNODES: Final = Target("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", cluster_scoped=True)

ROUTES: Final[tuple[Route, ...]] = (
    Route("/jobs/mutate", "mutatejob.volcano.sh", JOBS, ("CREATE",), mutate_job),
    Route("/jobs/validate", "validatejob.volcano.sh", JOBS, ("CREATE", "UPDATE"), validate_job),
    Route("/queues/mutate", "mutatequeue.volcano.sh", QUEUES, ("CREATE",), mutate_queue),
    Route("/queues/validate", "validatequeue.volcano.sh", QUEUES, ("CREATE", "UPDATE", "DELETE"), validate_queue),
    Route("/podgroups/mutate", "mutatepodgroup.volcano.sh", PODGROUPS, ("CREATE",), mutate_podgroup),
    Route("/podgroups/validate", "validatepodgroup.volcano.sh", PODGROUPS, ("CREATE",), validate_podgroup),
    Route("/pods/mutate", "mutatepod.volcano.sh", PODS, ("CREATE",), mutate_pod),
    Route("/pods/validate", "validatepod.volcano.sh", PODS, ("CREATE",), validate_pod),
    Route("/hypernodes/validate", "validatehypernode.volcano.sh", HYPERNODES, ("CREATE", "UPDATE"),
          validate_hypernode),
)
