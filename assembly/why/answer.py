"""`lapilli job why`: find the PodGroup a Job (or the user) names and explain it with the engine's explain module.

Pure over what `gather` read: the CLI and the dashboard both call these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assembly.why.gather import ClusterView
from extender.engine.conf import SchedulerConf
from extender.engine.explain import Context, Explanation, explain
from lapilli.meta import name_of, owner_references, uid_of


class WhyError(LookupError):
    """The job or PodGroup to explain is not there (the message says what to do)."""


def podgroup_of_job(view: ClusterView, namespace: str, job: Mapping[str, Any]) -> str:
    """`ns/name` of the PodGroup the job controller made for `job`: the one it owns (ownerReference by uid), else
    the `<job>-<uid>` name Volcano uses, else one named like the job (Volcano before v1.5)."""
    uid, name = uid_of(job), name_of(job)
    podgroups = view.objects.get("PodGroup", {})
    for key, pg in sorted(podgroups.items()):
        if not key.startswith(f"{namespace}/"):
            continue
        if any(ref.get("uid") == uid and uid for ref in owner_references(pg)):
            return key
    for candidate in (f"{namespace}/{name}-{uid}", f"{namespace}/{name}"):
        if candidate in podgroups:
            return candidate
    phase = ((job.get("status") or {}).get("state") or {}).get("phase") or "Pending"
    raise WhyError(f"job {namespace}/{name} ({phase}) has no PodGroup yet: the job controller creates it first "
                   "(is the Lapilli service running?)")


def why(view: ClusterView, conf: SchedulerConf, key: str, closed_by: Mapping[str, str] | None = None) -> Explanation:
    if key not in view.snapshot.podgroups:
        raise WhyError(f"PodGroup {key} not found")
    return explain(view.snapshot, conf, [key], Context(queue_closed_by=dict(closed_by or {})))[key]


def why_all(view: ClusterView, conf: SchedulerConf, closed_by: Mapping[str, str] | None = None,
            ) -> dict[str, Explanation]:
    return explain(view.snapshot, conf, None, Context(queue_closed_by=dict(closed_by or {})))
