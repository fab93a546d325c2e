"""A network topology for the dev cluster: node labels forming a tree, and the discovery ConfigMap that turns them
into HyperNodes (`lapilli dev up --topology 'spine=2,leaf=4'`, and e2e tests on their own nodes).

`spine=2,leaf=4` lists the tiers from the top down, each with how many domains it has across the cluster; node i
of n is in leaf `i * 4 // n`, leaf j in spine `j * 2 // 4`, so the nodes spread evenly and every domain holds at
least one of the tier below. Each tier is a node label (`spine=spine-0`, `leaf=leaf-3`; a key may carry a prefix,
`volcano.sh/hypernode=4`), and the ConfigMap lists the keys in Volcano's `networkTopologyDiscovery` `source: label`
format, highest tier first and `kubernetes.io/hostname` last. The service's HyperNode controller then makes one
HyperNode per label value, its `tierName` the label key, so `highestTierName: leaf` names the leaves.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

import yaml

from controller.hypernodes.config import CONFIG_KEY, CONFIGMAP_NAME, LABEL_SOURCE
from webhook.names import qualified_name

Tiers = tuple[tuple[str, int], ...]
"""(label key, domains) from the top tier down."""

HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
TOPOLOGY_TYPE: Final = "dev"


def parse_tiers(text: str, nodes: int) -> Tiers:
    """`spine=2,leaf=4` as tiers; ValueError naming what is wrong (a count that does not grow downwards, more
    domains than nodes, a key that is not a label key)."""
    tiers: list[tuple[str, int]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, count = part.partition("=")
        if not sep or qualified_name(key) or not count.isdigit():
            raise ValueError(f"topology tier {part!r} is not LABEL=COUNT (e.g. spine=2,leaf=4)")
        tiers.append((key, int(count)))
    if not tiers:
        raise ValueError("a topology needs at least one tier (e.g. spine=2,leaf=4)")
    keys = [key for key, _ in tiers]
    if len(set(keys)) != len(keys) or HOSTNAME_LABEL in keys:
        raise ValueError(f"topology tiers must be distinct labels other than {HOSTNAME_LABEL}: {', '.join(keys)}")
    counts = [count for _, count in tiers]
    if counts[0] < 1 or any(a > b for a, b in itertools.pairwise(counts)) or counts[-1] > nodes:
        raise ValueError(f"topology {text!r}: each tier needs at least as many domains as the one above it, and "
                         f"the lowest at most one per node ({nodes} nodes)")
    return tuple(tiers)


def node_labels(index: int, nodes: int, tiers: Tiers) -> dict[str, str]:
    """The topology labels of node `index` of `nodes`."""
    labels: dict[str, str] = {}
    position, of = index, nodes
    for key, count in reversed(tiers):
        position = position * count // of
        of = count
        labels[key] = f"{key.rpartition('/')[2]}-{position}"
    return labels


def discovery_configmap(tiers: Tiers, namespace: str, type_name: str = TOPOLOGY_TYPE) -> dict[str, Any]:
    """Volcano's controller ConfigMap enabling label discovery over these tiers."""
    conf = {"networkTopologyDiscovery": [{
        "source": LABEL_SOURCE, "enabled": True,
        "config": {"networkTopologyTypes": {type_name: [{"nodeLabel": key} for key, _ in tiers]
                                           + [{"nodeLabel": HOSTNAME_LABEL}]}},
    }]}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP_NAME, "namespace": namespace},
            "data": {CONFIG_KEY: yaml.safe_dump(conf, sort_keys=False)}}

