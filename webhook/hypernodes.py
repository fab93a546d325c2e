"""Admission of HyperNodes — Volcano's `pkg/webhooks/admission/hypernodes/validate/admit_hypernode.go`
(`validatehypernode.volcano.sh` at `/hypernodes/validate`, CREATE and UPDATE).

Besides Volcano's own checks (at least one member, a regex that compiles) it enforces what Volcano leaves to the
CRD's CEL rules and its optional ValidatingAdmissionPolicy (exactly one selector, labelMatch only on Node members,
an exactMatch name) on every Kubernetes version, and refuses up front the conflicts Volcano's scheduler only meets
once the object is stored (a cycle, a HyperNode with two parents, a node named in two HyperNodes of one tier),
against the HyperNodes the webhook's cache holds. The checks are the kernel's (`lapilli.topology`); every problem
is reported, joined by `; `, so kubectl prints one line. A status-only update (`hypernodes/status`) never reaches
here: the rule registers the main resource only.
"""

from __future__ import annotations

from typing import Final

from lapilli.topology import member_problems, read_hypernode, tree_problems
from webhook.context import AdmissionContext
from webhook.outcome import Outcome, allow, deny
from webhook.review import AdmissionRequest

NOT_SYNCED: Final = ("the webhook has not listed the cluster's HyperNodes yet, so it cannot check this one against "
                     "them; retry in a moment")


def _field(problem: str) -> str:
    return problem.split(": ", 1)[0]


def validate_hypernode(request: AdmissionRequest, ctx: AdmissionContext) -> Outcome:
    """`/hypernodes/validate`."""
    if request.operation not in ("CREATE", "UPDATE") or request.object is None:
        return allow()
    problems = member_problems(request.object)
    record, read = read_hypernode(request.object)
    # What only reading finds (a label selector's operator, a tier): the fields the checks above did not name.
    named = {_field(p) for p in problems}
    problems += [p for p in read if _field(p) not in named and not _field(p).startswith(tuple(named))]
    if problems or record is None:
        return deny("; ".join(problems))
    if not ctx.hypernodes.synced():
        return deny(NOT_SYNCED)
    others = [r for r in (read_hypernode(o)[0] for o in ctx.hypernodes.list()) if r is not None]
    if problems := tree_problems(record, others):
        return deny("; ".join(problems))
    return allow()
