"""The session's view of the HyperNode tree, and the jobs' network topology and sub-gangs made ready for it.

Counterparts: what Volcano's `framework/session.go` does with HyperNodes when a session opens (the tree with its
`<cluster-top-hypernode>` root, `HyperNodesTiers`, `HyperNodeTierNameMap`, `adjustNetworkTopologySpec`:
`highestTierName` → `highestTierAllowed`, soft mode → hard mode bounded by the root's tier, a sub-gang bounded by its
job's tier; `recoverAllocatedHyperNode`), and `api/job_info.go` / `sub_job_info.go` (a PodGroup's pods split into
sub-gangs by `subGroupPolicy`: `getSubJobMatchValues`, `getSubJobID`, the default sub-gang).

The tree comes from `lapilli.topology` over the session's ready nodes, through one `TreeCache` per process, so
sessions over an unchanged tree share it; what the engine derives from a tree (`TreeIndex`: HyperNodes by index,
each node's lowest-tier HyperNode and *path* — the HyperNodes holding it —, the per-tier table the normal-pod
binpack reads) is kept on the tree and built once. A tier name no HyperNode has is left untranslated, so a hard job
naming it has no tier limit and is placed as if flat (Volcano logs the same and goes on); soft mode is then hard up
to the root's tier, which is what "lowest tier that fits, else anywhere" comes to.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
import numpy.typing as npt

from extender.engine.model import ALLOCATED_STATUS, HARD, SOFT, Job, Node, SubJob, Task, TopologySpec
from extender.engine.snapshot import PodGroupRecord, SubGroupPolicy
from lapilli.topology import CLUSTER_TOP, HyperNodeRecord, HyperNodeTree, TreeCache

TREES: Final = TreeCache()
"""The trees this process built lately: a session over an unchanged tree and node set reuses one."""

Rows = npt.NDArray[np.intp]


@dataclass(frozen=True, slots=True, eq=False)
class TreeIndex:
    """A tree as index arrays over the session's node rows (node rows are the tree's node order)."""

    names: tuple[str, ...]  # HyperNode index -> name, by (tier, name); the root is last
    index: Mapping[str, int]
    tier: npt.NDArray[np.int64]  # per HyperNode
    rows: tuple[Rows, ...]  # per HyperNode: its node rows, ascending
    leaf_of: Rows  # per node row: its lowest-tier HyperNode (`FindHyperNodeForNode`), -1 for none
    path_of: Rows  # per node row: its path (the set of HyperNodes holding it)
    path_members: tuple[Rows, ...]  # per path: the HyperNodes holding its nodes
    path_lists: tuple[tuple[int, ...], ...]  # the same, as tuples of ints
    tier_range: tuple[int, ...]  # every tier from the lowest to the root's, as Volcano's normal-pod loop walks
    path_at_tier: Rows  # per (path, tier of tier_range): the HyperNode holding it there, len(names) for none
    row_of: Mapping[str, int]  # node name -> row
    above: npt.NDArray[np.bool_]  # [i, j]: HyperNode j is i or one of its ancestors
    path_list: list[int]  # `path_of` as ints
    rank: Rows  # per HyperNode: its place in name order (index order is by tier first)
    childless: npt.NDArray[np.bool_]  # per HyperNode: it has no HyperNode under it
    breadth: dict[str, tuple[int, ...]] = field(default_factory=dict)  # root -> its subtree, breadth first
    lcas: dict[tuple[str, str], str] = field(default_factory=dict)  # (a, b) -> their lowest common HyperNode
    one_leaf: dict[str, bool] = field(default_factory=dict)  # HyperNode -> its nodes share one lowest-tier one

    @classmethod
    def of(cls, tree: HyperNodeTree) -> TreeIndex:
        infos = sorted(tree.hypernodes.values(), key=lambda i: (i.virtual, i.tier, i.name))
        names = tuple(i.name for i in infos)
        index = {name: i for i, name in enumerate(names)}
        n = len(tree.node_names)
        holders: list[list[int]] = [[] for _ in range(n)]
        for i, info in enumerate(infos):
            for row in info.rows.tolist():
                holders[row].append(i)
        paths: dict[tuple[int, ...], int] = {}
        path_of = np.array([paths.setdefault(tuple(h), len(paths)) for h in holders], dtype=np.intp)
        tier_range = tuple(range(tree.tiers[0], tree.tiers[-1] + 1))
        at_tier = np.full((len(paths), len(tier_range)), len(names), dtype=np.intp)
        for members, p in paths.items():
            for i in reversed(members):  # by (tier, name): the lowest name at a tier is written last
                at_tier[p, tier_range.index(infos[i].tier)] = i
        leaf_of = np.full(n, -1, dtype=np.intp)
        row_of = {name: row for row, name in enumerate(tree.node_names)}
        for node, hypernode in tree.lowest.items():
            leaf_of[row_of[node]] = index[hypernode]
        above = np.zeros((len(names), len(names)), dtype=bool)
        for i, name in enumerate(names):
            above[i, [index[a] for a in tree.ancestors(name)]] = True
        rank = np.empty(len(names), dtype=np.intp)
        rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names), dtype=np.intp)
        path_lists, path_list = tuple(paths), path_of.tolist()
        return cls(names, index, np.array([i.tier for i in infos], dtype=np.int64), tuple(i.rows for i in infos),
                   leaf_of, path_of, tuple(np.array(m, dtype=np.intp) for m in paths), path_lists, tier_range,
                   at_tier, row_of, above, path_list, rank,
                   np.array([not i.children for i in infos], dtype=bool))

    def lca_tiers(self, held: int) -> npt.NDArray[np.int64]:
        """Per HyperNode i, the tier of the lowest HyperNode above both i and `held` (-1 when none)."""
        common = self.above & self.above[held]
        tiers = np.where(common, self.tier, np.iinfo(np.int64).max).min(axis=1)
        return np.where(common.any(axis=1), tiers, -1)


@dataclass(eq=False)
class Topology:
    """The session's HyperNodes: the tree, its index, and Volcano's session-level answers about them. While
    tracked, `room()` gives each HyperNode's future idle (allocatable − used + releasing − pipelined) as the session
    stands: allocate reads it to skip HyperNodes a gang cannot possibly fit before it tries them."""

    tree: HyperNodeTree
    index: TreeIndex
    free: npt.NDArray[np.float64] | None = None  # as of the owner's last `settle`
    settle: Callable[[], None] | None = None  # brings `free` up to date (the owner may defer its updates)
    _indices: dict[tuple[str, ...], Rows] = field(default_factory=dict)  # gradients asked this session, by index

    @property
    def ready(self) -> bool:
        return self.tree.ready

    @property
    def root(self) -> str:
        return CLUSTER_TOP

    @property
    def has_hypernodes(self) -> bool:
        """Any HyperNode besides the root."""
        return len(self.index.names) > 1

    def tier_of(self, name: str) -> int | None:
        return self.tree.tier_of(name)

    def indices(self, names: Sequence[str]) -> Rows:
        """The HyperNodes `names` by index, in that order (kept for the session: gangs of one shape ask the same
        gradients)."""
        key = tuple(names)
        found = self._indices.get(key)
        if found is None:
            index = self.index.index
            found = self._indices[key] = np.array([index[name] for name in key], dtype=np.intp)
        return found

    def rows_of(self, name: str) -> Rows:
        i = self.index.index.get(name)
        return self.index.rows[i] if i is not None else np.zeros(0, dtype=np.intp)

    def within_one_leaf(self, name: str) -> bool:
        """Whether every node of `name` has the same lowest-tier HyperNode (`hypernode_of_row`): then nothing
        under it is nearer to or farther from anything than another node of it (kept per tree)."""
        known = self.index.one_leaf.get(name)
        if known is None:
            leaves = self.index.leaf_of[self.rows_of(name)]
            known = self.index.one_leaf[name] = bool(len(leaves)) and bool((leaves == leaves[0]).all())
        return known

    def breadth_first(self, root: str) -> tuple[int, ...]:
        """The HyperNodes under `root` (itself first) breadth first, children by name, as indices (kept per tree)."""
        order = self.index.breadth.get(root)
        if order is None:
            names, queue, seen = [], [root], {root}
            while queue:
                current = queue.pop(0)
                names.append(current)
                for child in self.children(current):
                    if child not in seen:
                        seen.add(child)
                        queue.append(child)
            order = self.index.breadth[root] = tuple(self.index.index[n] for n in names if n in self.index.index)
        return order

    def children(self, name: str) -> tuple[str, ...]:
        info = self.tree.hypernodes.get(name)
        return info.children if info is not None else ()

    def lca(self, a: str, b: str) -> str:
        """The tree's `lca`, kept per pair for the tree's life (allocate asks it after every placement)."""
        key = (a, b)
        found = self.index.lcas.get(key)
        if found is None:
            found = self.index.lcas[key] = self.tree.lca(a, b)
        return found

    def hypernode_of_row(self, row: int) -> str:
        i = int(self.index.leaf_of[row])
        return self.index.names[i] if i >= 0 else ""

    def holders(self, row: int) -> Rows:
        """Every HyperNode holding node `row` (the root included), by index."""
        return self.index.path_members[int(self.index.path_of[row])]

    def track(self, free: npt.NDArray[np.float64], settle: Callable[[], None]) -> None:
        """Start following each HyperNode's future idle (`free`, per HyperNode, as the session opens): its owner
        updates it for every change of a node's, when `settle` is called at the latest."""
        self.free, self.settle = free, settle

    def room(self) -> npt.NDArray[np.float64] | None:
        """Each HyperNode's future idle as the session stands (None when not tracked)."""
        if self.settle is not None:
            self.settle()
        return self.free

    def aggregate(self, matrix: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per HyperNode, the sum of `matrix`'s node rows under it (e.g. allocatable → each domain's total)."""
        out = np.zeros((len(self.index.names), matrix.shape[1]))
        for i, rows in enumerate(self.index.rows):
            if len(rows):
                out[i] = matrix[rows].sum(axis=0)
        return out


def session_topology(records: Iterable[HyperNodeRecord], nodes: Sequence[Node]) -> Topology:
    """The tree over the session's nodes (rows in their order), from the process's cache."""
    tree = TREES.get(records, [(n.name, n.labels) for n in nodes])
    index = tree.derived.get("engine")
    if not isinstance(index, TreeIndex):
        index = tree.derived["engine"] = TreeIndex.of(tree)
    return Topology(tree, index)


# ---- sub-gangs (api/job_info.go, sub_job_info.go) --------------------------------------------------------------
def match_values(policy: SubGroupPolicy, labels: Mapping[str, str]) -> list[str] | None:
    """`getSubJobMatchValues`: None when the pod is not the policy's (its selector refuses the pod, or a match key
    is missing or empty), else the pod's values of the match keys ([] when the policy has none)."""
    if policy.broken or (policy.selector is not None and not policy.selector.matches(labels)):
        return None
    values = []
    for key in policy.match_keys:
        value = labels.get(key)
        if not value:
            return None
        values.append(value)
    return values


def subjob_id(job: str, policy: str, values: Sequence[str]) -> str:
    """`getSubJobID`: `<job>/<policy>-<values joined by ->`, a long join replaced by a short digest."""
    joined = "-".join(values)
    if len(joined) > 128:
        joined = hashlib.blake2s(joined.encode(), digest_size=4).hexdigest()
    return f"{job}/{policy}-{joined}"


def _match_index(values: Sequence[str]) -> int:
    try:
        return int(values[0]) if values else 0
    except ValueError:
        return 0


def build_subjobs(job: Job, pg: PodGroupRecord, labels: Mapping[str, Mapping[str, str]]) -> None:
    """Split `job`'s tasks into sub-gangs when its PodGroup has a network topology or a subGroupPolicy (a job
    with neither keeps `subjobs = None`). `labels`: task uid -> pod labels. A task goes to the first policy whose
    match values it has (a policy without matchLabelKeys takes none, as in Volcano), else to the default sub-gang,
    which carries the job's own topology and, without policies, the job's minMember."""
    if pg.network_topology is None and not pg.sub_groups:
        return
    job.topology = pg.network_topology
    job.has_policy = bool(pg.sub_groups)
    job.subjobs = {}
    job.min_subjobs = {f"{job.uid}/{p.name}": p.min_groups for p in pg.sub_groups}
    if not pg.sub_groups:
        job.add_all_to_subjob(sorted(job.tasks.values(), key=lambda t: t.uid), default_subjob(job))
        return
    for task in sorted(job.tasks.values(), key=lambda t: t.uid):
        job.add_to_subjob(task, _subjob_for(job, pg, labels.get(task.uid, {})))


def _subjob_for(job: Job, pg: PodGroupRecord, labels: Mapping[str, str]) -> SubJob:
    assert job.subjobs is not None
    for policy in pg.sub_groups:
        values = match_values(policy, labels)
        if values:
            uid = subjob_id(job.uid, policy.name, values)
            if uid not in job.subjobs:
                job.subjobs[uid] = SubJob(uid, f"{job.uid}/{policy.name}", job.uid, policy.size,
                                          _match_index(values), policy.topology)
            return job.subjobs[uid]
    return default_subjob(job)


def default_subjob(job: Job) -> SubJob:
    """The job's default sub-gang, made (with every task in it) for a job that had none: a nomination needs one
    (in Volcano every job has it)."""
    if job.subjobs is None:
        job.subjobs = {}
        sub = job.subjobs[job.uid] = SubJob(job.uid, job.uid, job.uid, job.min_member, 0, job.topology)
        for task in sorted(job.tasks.values(), key=lambda t: t.uid):
            job.add_to_subjob(task, sub)
    default = job.subjobs.get(job.uid)
    if default is None:
        size = 1 if job.has_policy else job.min_member
        default = job.subjobs[job.uid] = SubJob(job.uid, job.uid, job.uid, size, 0, job.topology)
    return default


# ---- session preparation (framework/session.go) ----------------------------------------------------------------
def _translated(spec: TopologySpec | None, names: Mapping[str, int]) -> TopologySpec | None:
    if spec is None or spec.tier is not None or not spec.tier_name or spec.tier_name not in names:
        return spec
    return TopologySpec(spec.mode, names[spec.tier_name], "")


def _hard(spec: TopologySpec | None, tier: int) -> TopologySpec | None:
    return TopologySpec(HARD, tier, "") if spec is not None and spec.mode == SOFT else spec


def prepare(jobs: Iterable[Job], topo: Topology, nominations: Mapping[str, Mapping[str, str]]) -> None:
    """`adjustNetworkTopologySpec` then `recoverAllocatedHyperNode` for every job with sub-gangs, and the
    nominations carried in from earlier sessions."""
    names, top = topo.tree.tier_names, topo.tree.root.tier
    for job in jobs:
        if job.subjobs is None:
            continue
        job.topology = _hard(_translated(job.topology, names), top)
        bound = job.topology.tier if job.topology is not None and job.topology.tier is not None else top
        for sub in job.subjobs.values():
            sub.topology = _hard(_translated(sub.topology, names), bound)
            sub.nominated_hypernode = nominations.get(job.uid, {}).get(sub.uid, "")
        if topo.ready:
            recover_allocated(job, topo)


def recover_allocated(job: Job, topo: Topology, row_of: Mapping[str, int] | None = None) -> None:
    """A sub-gang's allocated HyperNode is the lowest-tier HyperNode holding every node its placed tasks are on;
    the job's is the LCA of its sub-gangs'. Each session starts from what is placed, as Volcano's does after a
    restart."""
    assert job.subjobs is not None
    rows = row_of if row_of is not None else topo.index.row_of
    for sub in job.subjobs.values():
        if sub.topology is None or sub.allocated_hypernode:
            continue
        sub.allocated_hypernode = _lowest_holding(_placed(sub.tasks.values()), topo, rows)
    lca = ""
    for sub in job.subjobs.values():
        if sub.allocated_hypernode:
            lca = topo.lca(lca, sub.allocated_hypernode)
    job.allocated_hypernode = lca


def _placed(tasks: Iterable[Task]) -> list[str]:
    return [t.node for t in tasks if t.status in ALLOCATED_STATUS and t.node]


def _lowest_holding(nodes: Sequence[str], topo: Topology, rows: Mapping[str, int]) -> str:
    common: set[int] | None = None
    for node in nodes:
        row = rows.get(node)
        holders = set(topo.holders(row).tolist()) if row is not None else set()
        common = holders if common is None else common & holders
        if not common:
            return ""
    if not common:
        return ""
    best = min(common, key=lambda i: (int(topo.index.tier[i]), topo.index.names[i]))
    return topo.index.names[best]


__all__ = [
    "TREES",
    "Rows",
    "Topology",
    "TreeIndex",
    "build_subjobs",
    "default_subjob",
    "match_values",
    "prepare",
    "recover_allocated",
    "session_topology",
    "subjob_id",
]
