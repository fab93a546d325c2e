"""kube-scheduler's extender wire types (`k8s.io/kube-scheduler/extender/v1`): capitalised keys, `null` accepted.

Pods and nodes arrive as raw dicts (validating a PodSpec per call would cost more than the verb itself); the filter
and prioritize answers are built as plain dicts for the same reason.
"""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from lapilli.meta import name_of, uid_of


class _Wire(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class ExtenderArgs(_Wire):
    pod: dict[str, Any] = Field(alias="Pod")
    nodes: dict[str, Any] | None = Field(default=None, alias="Nodes")
    node_names: list[str] | None = Field(default=None, alias="NodeNames")

    def names(self) -> list[str]:
        """Offered node names, whichever form kube-scheduler used (`nodeCacheCapable` or not)."""
        if self.node_names is not None:
            return self.node_names
        items = (self.nodes or {}).get("items") or []
        return [name_of(n) for n in items]


class ExtenderFilterResult(TypedDict):
    """Built as a plain dict: filter echoes up to every node name of the cluster, and a model would validate and
    copy that list twice on the verb kube-scheduler waits for."""

    Nodes: None
    NodeNames: list[str] | None
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str


def filter_result(names: list[str] | None = None, *, error: str = "") -> ExtenderFilterResult:
    """`nodeCacheCapable` answer: names only."""
    return {"Nodes": None, "NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": error}


def filter_refusal(offered: list[str], reason: str) -> ExtenderFilterResult:
    """Every offered node fails with one reason, as unresolvable too: preempting for this pod would not help
    (kube-scheduler shows the reason once in the pod's events)."""
    failed = dict.fromkeys(offered, reason)
    return {"Nodes": None, "NodeNames": [], "FailedNodes": failed, "FailedAndUnresolvableNodes": failed, "Error": ""}


class ExtenderBindingArgs(_Wire):
    pod_name: str = Field(alias="PodName")
    pod_namespace: str = Field(alias="PodNamespace")
    pod_uid: str = Field(alias="PodUID")
    node: str = Field(alias="Node")


class ExtenderBindingResult(_Wire):
    error: str = Field(default="", alias="Error")


class MetaPod(_Wire):
    uid: str = Field(alias="UID")


class MetaVictims(_Wire):
    pods: list[MetaPod] = Field(default_factory=list, alias="Pods")
    num_pdb_violations: int = Field(default=0, alias="NumPDBViolations")


class ExtenderPreemptionArgs(_Wire):
    pod: dict[str, Any] = Field(alias="Pod")
    node_to_victims: dict[str, dict[str, Any]] | None = Field(default=None, alias="NodeNameToVictims")
    node_to_meta_victims: dict[str, MetaVictims] | None = Field(default=None, alias="NodeNameToMetaVictims")

    def victims(self) -> dict[str, list[str]]:
        """node → victim pod UIDs, from whichever map kube-scheduler filled."""
        if self.node_to_meta_victims is not None:
            return {node: [p.uid for p in v.pods] for node, v in self.node_to_meta_victims.items()}
        out: dict[str, list[str]] = {}
        for node, victims in (self.node_to_victims or {}).items():
            out[node] = [uid_of(p) for p in victims.get("Pods") or []]
        return out


class ExtenderPreemptionResult(_Wire):
    node_to_meta_victims: dict[str, MetaVictims] = Field(default_factory=dict, alias="NodeNameToMetaVictims")
