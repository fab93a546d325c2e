"""Volcano `HyperNode` (topology.volcano.sh/v1alpha1, cluster-scoped; short name hn): one network domain (a
leaf switch, a spine, a super-pod) and its members, nodes or smaller HyperNodes.

Counterpart: `staging/src/volcano.sh/apis/pkg/apis/topology/v1alpha1/hypernode_types.go` (HyperNode,
HyperNodeSpec, MemberSpec, MemberSelector, ExactMatch, RegexMatch, HyperNodeStatus) and the `metav1.Condition`
its status holds.

Exactly one of `exactMatch` / `regexMatch` / `labelMatch` per member, `labelMatch` only on a `Node` member, a
regex that compiles, no cycle and no member under two parents of one tier: those are admission rules
(`webhook.hypernodes`), not model rules, so the webhook phrases them and a HyperNode some other tool wrote
still reads.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from lapilli.api.common import (
    DNS_SUBDOMAIN_PATTERN,
    LabelSelector,
    Timestamp,
    TopLevelModel,
    VolcanoModel,
    at_least,
    named,
    not_empty,
)
from lapilli.api.constants import HYPERNODE_KIND, TOPOLOGY_API_VERSION

# metav1.Condition's patterns, as every CRD that embeds it carries them.
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class MemberType(StrEnum):
    """What a member selects: nodes, or HyperNodes of a lower tier."""

    NODE = "Node"
    HYPER_NODE = "HyperNode"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ExactMatch(VolcanoModel):
    """One node or HyperNode by name."""

    name: Annotated[str, Field(strict=True), named(max_length=253, min_length=1, pattern=DNS_SUBDOMAIN_PATTERN)]


class RegexMatch(VolcanoModel):
    """Every node (or HyperNode) whose name the pattern matches (Go RE2 syntax, unanchored)."""

    pattern: Annotated[str, Field(strict=True), named(min_length=1)]


class MemberSelector(VolcanoModel):
    """How a member is picked: exactly one of the three (admission checks it)."""

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None

    def kinds(self) -> list[str]:
        """The wire names of the selectors that are set, in Volcano's order."""
        chosen = (("exactMatch", self.exact_match), ("regexMatch", self.regex_match), ("labelMatch", self.label_match))
        return [name for name, value in chosen if value is not None]


class MemberSpec(VolcanoModel):
    """One member of a HyperNode."""

    type: MemberType
    selector: MemberSelector = Field(default_factory=MemberSelector)


class HyperNodeSpec(VolcanoModel):
    """The domain's tier (1 is closest to the nodes), the tier's name and its members."""

    tier: Annotated[int, Field(strict=True), at_least(0)]
    tier_name: Annotated[str, Field(strict=True), named(max_length=253)] = ""
    members: Annotated[list[MemberSpec], not_empty()] = Field(default_factory=list)


class Condition(VolcanoModel):
    """`metav1.Condition`."""

    type: Annotated[str, Field(strict=True), named(max_length=316, pattern=CONDITION_TYPE_PATTERN)]
    status: ConditionStatus
    observed_generation: Annotated[int, Field(strict=True), at_least(0)] | None = None
    last_transition_time: Timestamp
    reason: Annotated[str, Field(strict=True), named(max_length=1024, min_length=1, pattern=CONDITION_REASON_PATTERN)]
    message: Annotated[str, Field(strict=True), named(max_length=32768)]


class HyperNodeStatus(VolcanoModel):
    """What the HyperNode controller observes: how many nodes the domain holds, and its conditions."""

    conditions: list[Condition] = Field(default_factory=list)
    node_count: Annotated[int, Field(strict=True), at_least(0)] = 0


class HyperNode(TopLevelModel):
    """A Volcano HyperNode: one network-topology domain."""

    api_version: Literal["topology.volcano.sh/v1alpha1"] = TOPOLOGY_API_VERSION
    kind: Literal["HyperNode"] = HYPERNODE_KIND
    spec: HyperNodeSpec
    status: HyperNodeStatus = Field(default_factory=HyperNodeStatus)

