"""`lapilli job why`: find the PodGroup a Job (or the user) names and explain it with the engine's explain module.

Pure over what `gather` read: the CLI and the dashboard both call these.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assembly.why.estimate import Estimate, estimates, jobs_by_podgroup
from assembly.why.gather import ClusterConf, ClusterView, Unreadable
from extender.engine.conf import SchedulerConf
from extender.engine.explain import WHY_CONDITION, Context, Explanation, Kind, explain
from lapilli.meta import JSON, Obj, as_json, name_of, owner_references, uid_of


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


def why(view: ClusterView, conf: SchedulerConf, key: str, closed_by: Mapping[str, str] | None = None,
        now: float | None = None) -> Explanation:
    """`now`: the session's clock (default the wall clock, as the service's sessions run)."""
    if key not in view.snapshot.podgroups:
        unread = [str(u) for u in view.unreadable if u.kind == "PodGroup"]
        raise WhyError(f"PodGroup {key} not found" + (f" (could not read {'; '.join(unread)})" if unread else ""))
    context = Context(queue_closed_by=dict(closed_by or {}))
    return explain(view.snapshot, conf, [key], context, time.time() if now is None else now)[key]


def why_all(view: ClusterView, conf: SchedulerConf, closed_by: Mapping[str, str] | None = None,
            now: float | None = None) -> dict[str, Explanation]:
    context = Context(queue_closed_by=dict(closed_by or {}))
    return explain(view.snapshot, conf, None, context, time.time() if now is None else now)


def service_condition(podgroup: Obj | None) -> dict[str, JSON] | None:
    """The `lapilli.io/Why` condition the live service wrote on the PodGroup (computed with the scheduler's own
    full view of the cluster), or None."""
    for cond in ((podgroup or {}).get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == WHY_CONDITION:
            return {k: as_json(cond.get(k)) for k in ("status", "reason", "message", "lastTransitionTime")}
    return None


def condition_line(cond: Mapping[str, JSON]) -> str:
    return (f"the scheduler's own answer (condition {WHY_CONDITION} of {cond.get('lastTransitionTime') or '?'}): "
            f"{cond.get('reason')}: {cond.get('message')}")


STARTED_KINDS = frozenset({Kind.RUNNING, Kind.STARTING})  # no start to estimate


def estimate_of(view: ClusterView, conf: SchedulerConf, jobs: Sequence[Obj], podgroup: str,
                now: float | None = None) -> Estimate | None:
    """The expected start of the Volcano Job that owns `podgroup`, None for a bare PodGroup."""
    owner = jobs_by_podgroup(jobs, view.objects.get("PodGroup", {})).get(podgroup)
    if owner is None:
        return None
    return estimates(view.objects, jobs, conf, time.time() if now is None else now).get(owner)


@dataclass(slots=True)
class Answer:
    """What `lapilli job why` prints: the explanation, the conf it used, what could not be read (then the answer
    is partial), and the service's own condition on the PodGroup."""

    explanation: Explanation
    job: str  # the Volcano Job named (ns/name), else ""
    conf: ClusterConf
    unreadable: list[Unreadable] = field(default_factory=list)
    condition: dict[str, JSON] | None = None
    estimate: Estimate | None = None  # when a waiting Volcano Job is expected to start (assembly.why.estimate)

    @classmethod
    def of(cls, view: ClusterView, conf: ClusterConf, explanation: Explanation, job: str = "") -> Answer:
        unreadable = [*view.unreadable, *([conf.unreadable] if conf.unreadable else [])]
        pg = view.objects.get("PodGroup", {}).get(explanation.podgroup)
        return cls(explanation, job, conf, unreadable, service_condition(pg))

    @property
    def partial(self) -> bool:
        return bool(self.unreadable)

    def to_json(self) -> dict[str, JSON]:
        return {**self.explanation.to_json(), "job": self.job.partition("/")[2] or None, "conf": self.conf.where,
                "partial": self.partial, "unreadable": [u.to_json() for u in self.unreadable],
                "scheduler_condition": self.condition,
                "estimate": self.estimate.to_json() if self.estimate is not None else None}

    def render(self) -> str:
        out = self.explanation.render(self.job)
        if self.estimate is not None:
            out += f"  {self.estimate.text()}\n"
        if self.partial:
            out += ("PARTIAL ANSWER: your credentials could not read "
                    f"{'; '.join(str(u) for u in self.unreadable)}; the reasons above may be wrong (README: "
                    "\"Why is my job pending?\" lists the read access an exact answer needs)\n")
            if self.condition is not None:
                out += condition_line(self.condition) + "\n"
        return out + f"(scheduler conf: {self.conf.where})\n"
