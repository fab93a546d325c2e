"""kube-scheduler's extender wire types (`k8s.io/kube-scheduler/extender/v1`): capitalised keys, `null` accepted.

Pods and nodes arrive as raw dicts (validating a PodSpec per call would cost more than the verb itself); the filter
and prioritize answers are built as plain dicts for the same reason.
"""

from __future__ import annotations

from typing import Any, Final, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from extender.engine.status import Status
from lapilli.meta import name_of, uid_of

MAX_NODES: Final = 65_536
"""Most node names one request may offer: the largest clusters run (GKE's limit is 65,000 nodes). More is refused
before any work, so a hostile list costs its decoding only."""
MAX_CANDIDATES: Final = 10_000
"""Most nodes one preempt request may propose victims on: kube-scheduler offers max(100, 10% of the nodes)."""


def _at_most(limit: int, what: str) -> Any:
    def check(value: Any) -> Any:
        if isinstance(value, list | dict) and len(value) > limit:
            raise ValueError(f"{len(value)} {what}, more than the {limit} any cluster sends")
        return value

    return check


class _Wire(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class ExtenderArgs(_Wire):
    pod: dict[str, Any] = Field(alias="Pod")
    nodes: dict[str, Any] | None = Field(default=None, alias="Nodes")
    node_names: list[str] | None = Field(default=None, alias="NodeNames")

    _names_bounded = field_validator("node_names", mode="before")(_at_most(MAX_NODES, "node names"))

    @field_validator("nodes", mode="before")
    @classmethod
    def _node_list(cls, value: Any) -> Any:
        items = value.get("items") if isinstance(value, dict) else None
        if items is not None and not (isinstance(items, list) and all(isinstance(n, dict) for n in items)):
            raise ValueError("Nodes.items must be a list of Node objects")
        return _at_most(MAX_NODES, "nodes")(items) and value

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


def filter_result(names: list[str] | None = None, *, error: str = "",
                  failed: dict[str, str] | None = None) -> ExtenderFilterResult:
    """`nodeCacheCapable` answer: names only; `failed` gives the offered nodes left out their reasons (each
    preemption may resolve)."""
    return {"Nodes": None, "NodeNames": names, "FailedNodes": failed or {}, "FailedAndUnresolvableNodes": {},
            "Error": error}


def filter_refusal(offered: list[str], status: Status) -> ExtenderFilterResult:
    """Every offered node fails with one reason (kube-scheduler shows it once in the pod's events). Only an
    UnschedulableAndUnresolvable status marks the nodes `FailedAndUnresolvableNodes` (preempting there would not
    help; they stay in `FailedNodes` too, for schedulers that predate the second map, which takes precedence);
    an Unschedulable one leaves kube-scheduler free to try preemption, whose victims the preempt verb vets."""
    failed = dict.fromkeys(offered, status.message)
    unresolvable = failed if status.unresolvable else {}
    return {
        "Nodes": None, "NodeNames": [], "FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": ""
    }


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
    # Raw and checked by hand: a model per victim costs ~20 us, and a body may carry 100k of them.
    node_to_meta_victims: dict[str, dict[str, Any]] | None = Field(default=None, alias="NodeNameToMetaVictims")

    _candidates_bounded = field_validator("node_to_victims", "node_to_meta_victims", mode="before")(
        _at_most(MAX_CANDIDATES, "candidate nodes")
    )

    @field_validator("node_to_victims", mode="after")
    @classmethod
    def _victim_pods(cls, value: dict[str, dict[str, Any]] | None) -> Any:
        for victims in (value or {}).values():
            pods = victims.get("Pods")
            if pods is not None and not (isinstance(pods, list) and all(isinstance(p, dict) for p in pods)):
                raise ValueError("NodeNameToVictims[].Pods must be a list of Pod objects")
        return value

    @field_validator("node_to_meta_victims", mode="after")
    @classmethod
    def _meta_pods(cls, value: dict[str, dict[str, Any]] | None) -> Any:
        for victims in (value or {}).values():
            pods = victims.get("Pods")
            if pods is None:
                continue
            if not isinstance(pods, list) or not all(isinstance(p, dict) and isinstance(p.get("UID"), str)
                                                     for p in pods):
                raise ValueError("NodeNameToMetaVictims[].Pods must be a list of {\"UID\": string}")
        return value

    def victims(self) -> dict[str, list[str]]:
        """node → victim pod UIDs, from whichever map kube-scheduler filled."""
        if self.node_to_meta_victims is not None:
            return {node: [p["UID"] for p in v.get("Pods") or []] for node, v in self.node_to_meta_victims.items()}
        out: dict[str, list[str]] = {}
        for node, victims in (self.node_to_victims or {}).items():
            out[node] = [uid_of(p) for p in victims.get("Pods") or []]
        return out


class ExtenderPreemptionResult(_Wire):
    node_to_meta_victims: dict[str, MetaVictims] = Field(default_factory=dict, alias="NodeNameToMetaVictims")
