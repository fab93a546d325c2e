"""Plain reference computations the engine's fast paths are checked against (no tests here)."""

from __future__ import annotations

import numpy as np

from extender.engine.interface import Code, Status
from extender.engine.model import Task
from extender.engine.plugins.interpodaffinity import REASON_AFFINITY
from extender.engine.plugins.podtopologyspread import REASON_MISSING_LABEL
from extender.engine.session import Session
from lapilli.resources.vector import TOLERANCE

# The first refusals kube-scheduler gives as UnschedulableAndUnresolvable among what the dynamic predicates say.
UNRESOLVABLE = frozenset({REASON_AFFINITY, REASON_MISSING_LABEL})


def _resolvable_somewhere(ssn: Session, task: Task) -> bool:
    """Some node the static predicates accept whose predicates' refusals (each part's first) include none that no
    eviction fixes."""
    static = ssn.placement.static_mask(task)
    for node in ssn.nodes:
        reasons = {r for pred in ssn.predicates.all() for r in pred.explain(task, node)}
        if static[node.idx] and not reasons & UNRESOLVABLE:
            return True
    return False


def reference_fit_error(ssn: Session, task: Task) -> Status:
    """Volcano's FitErrors histogram the plain way: every node, every predicate's (and node-local callback's)
    reasons, each counted once per node."""
    reasons: dict[str, int] = {}
    future = ssn.arrays.future_idle()
    placement = ssn.placement
    for node in ssn.nodes:
        short = np.flatnonzero(task.resreq >= future[node.idx] + TOLERANCE)
        found = [f"Insufficient {ssn.dims.names[int(d)]}" for d in short]
        for pred in ssn.predicates.all():
            found.extend(pred.explain(task, node))
        for local in placement._locals:
            if local.applies(task):
                found.extend(local.explain(task, node))
        for reason in dict.fromkeys(found):
            reasons[reason] = reasons.get(reason, 0) + 1
    histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))
    text = f"0/{len(ssn.nodes)} nodes are unavailable"
    code = Code.UNSCHEDULABLE if _resolvable_somewhere(ssn, task) else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return Status(code, f"{text}: {histogram}." if histogram else text)
