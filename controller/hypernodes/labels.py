"""HyperNodes made from node labels, as pure functions: what Volcano's label discoverer would create.

Counterpart: `pkg/controllers/hypernode/discovery/label/label.go` (`generateHyperNodeInfo`, `buildHyperNodeName`,
`buildHyperNodes`). For each node and each topology type, tier 1 is the HyperNode of the node's value of the type's
lowest label, its members are nodes; tier 2 the HyperNode of the next label up, its members the tier-1 HyperNodes;
and so on, stopping at the first label the node lacks. Nodes sharing a label value share its HyperNode. A
HyperNode is named `hypernode-<type>-tier<N>-<5 random characters>`, labelled `volcano.sh/network-topology-source:
label` and `<label key>: <value>`, with `tierName` the label key; one already made for that key and value keeps its
name. Unlike Volcano, nodes and types are walked in name order and the random source is given, so one cluster
state always yields the same HyperNodes (Volcano walks Go maps) and a test can pin the names.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from controller.hypernodes.config import LABEL_SOURCE, LabelDiscovery
from lapilli.api.constants import HYPERNODE_KIND, NETWORK_TOPOLOGY_SOURCE_LABEL, TOPOLOGY_API_VERSION
from lapilli.meta import Obj, labels_of, name_of

# k8s.io/apimachinery/pkg/util/rand's alphabet (no vowels, no look-alikes), as Volcano's names use.
_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"
_ATTEMPTS: Final = 20


class NamingFailed(RuntimeError):
    """No free name in `_ATTEMPTS` draws (Volcano's "unable to get unique hyperNodeName")."""


@dataclass(slots=True)
class _Domain:
    tier: int
    tier_name: str
    labels: dict[str, str]
    members: set[str] = field(default_factory=set)


def clean_type(name: str) -> str:
    """`cleanString`: letters lower-cased, digits, `.` and `-` kept, anything else becomes `-`."""
    return "".join(c.lower() if c.isalpha() else c if c.isdigit() or c in ".-" else "-" for c in name)


def _prefix(type_name: str, tier: int) -> str:
    return f"hypernode-{clean_type(type_name)}-tier{tier}"


def _name(type_name: str, key: str, value: str, tier: int, existing: Iterable[Obj], taken: set[str],
          rng: random.Random) -> str:
    """`buildHyperNodeName`: the discovered HyperNode already made for `key=value` at this type and tier (the
    first by name), else a new random name no HyperNode has."""
    prefix = _prefix(type_name, tier)
    mine = sorted(name_of(h) for h in existing
                  if labels_of(h).get(key) == value and labels_of(h).get(NETWORK_TOPOLOGY_SOURCE_LABEL) == LABEL_SOURCE)
    reused = next((name for name in mine if name.startswith(prefix + "-")), None)
    if reused is not None:
        return reused
    for _ in range(_ATTEMPTS):
        name = f"{prefix}-{''.join(rng.choice(_ALPHABET) for _ in range(5))}"
        if name not in taken:
            return name
    raise NamingFailed(f"no free HyperNode name {prefix}-* after {_ATTEMPTS} attempts")


def _member(name: str, tier: int) -> dict[str, Any]:
    return {"type": "Node" if tier == 1 else "HyperNode", "selector": {"exactMatch": {"name": name}}}


def discover(config: LabelDiscovery, nodes: Iterable[Obj], existing: Iterable[Obj],
             rng: random.Random) -> dict[str, dict[str, Any]]:
    """The HyperNodes the labels of `nodes` describe, by name, as objects to create or to bring `existing` (every
    HyperNode in the cluster, whoever made it: a new name must not collide with any) in step with."""
    existing = list(existing)
    taken = {name_of(h) for h in existing}
    domains: dict[str, _Domain] = {}
    named: dict[tuple[str, str], str] = {}
    for node in sorted(nodes, key=name_of):
        labels = labels_of(node)
        for type_name, keys in config.types:
            member = name_of(node)
            for index, key in enumerate(keys):
                if key not in labels:
                    break
                tier, value = index + 1, labels[key]
                name = named.get((key, value))
                if name is None:
                    name = _name(type_name, key, value, tier, existing, taken, rng)
                    named[(key, value)] = name
                    taken.add(name)
                domain = domains.setdefault(name, _Domain(tier, key, {key: value}))
                domain.members.add(member)
                member = name
    return {name: _object(name, d) for name, d in domains.items()}


def _object(name: str, domain: _Domain) -> dict[str, Any]:
    labels = {NETWORK_TOPOLOGY_SOURCE_LABEL: LABEL_SOURCE, **domain.labels}
    return {
        "apiVersion": TOPOLOGY_API_VERSION, "kind": HYPERNODE_KIND,
        "metadata": {"name": name, "labels": labels},
        "spec": {"tier": domain.tier, "tierName": domain.tier_name,
                 "members": [_member(m, domain.tier) for m in sorted(domain.members)]},
    }


def is_discovered(hypernode: Obj) -> bool:
    """Made by label discovery (Volcano's or ours): the only HyperNodes discovery may change or delete."""
    return labels_of(hypernode).get(NETWORK_TOPOLOGY_SOURCE_LABEL) == LABEL_SOURCE

