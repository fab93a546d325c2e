"""`networkTopology` rules of Volcano's job and PodGroup webhooks (`validateNetworkTopology`).

`highestTierAllowed` and `highestTierName` are exclusive wherever a networkTopology appears: on the Job, on a
task's `partitionPolicy`, on a PodGroup and on its `subGroupPolicy` entries. Volcano tests whether
`highestTierAllowed` is *set* (a pointer), so `highestTierAllowed: 0` with a tier name is refused too; an empty
`highestTierName` counts as unset, as Go's empty string does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from lapilli.api import NetworkTopologySpec

TOPOLOGY_CONFLICT: Final = (
    "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"
)


def topology_conflict(topology: object) -> bool:
    """Both tier fields present: `highestTierAllowed` set to anything, `highestTierName` non-empty (a decoded
    Job's `NetworkTopologySpec`, or a raw PodGroup's mapping)."""
    if isinstance(topology, NetworkTopologySpec):
        return topology.tiers_conflict()
    return (
        isinstance(topology, Mapping)
        and topology.get("highestTierAllowed") is not None
        and bool(topology.get("highestTierName"))
    )
