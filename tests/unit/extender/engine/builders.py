"""Compact builders for engine tests, in the spirit of Volcano's `uthelper` (BuildNode, BuildPod, …).

A scenario is YAML with short entries that these functions expand into real Kubernetes objects, so the same
documents can also be fed to `lapilli schedule`.
"""

from __future__ import annotations

from typing import Any

from extender.engine.conf import FLAGS, Registry, parse_conf
from extender.engine.results import Decisions
from extender.engine.run import open_session, registry, run_session
from extender.engine.session import Session
from extender.engine.snapshot import build_snapshot
from tests.unit.extender.engine.fake_plugins import FAKE_PLUGINS


def node(spec: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec["name"], "labels": spec.get("labels", {}), "annotations": spec.get("annotations", {})},
        "spec": {},
        "status": {"allocatable": {"pods": "10", **spec.get("alloc", {})}},
    }
    if "taints" in spec:
        doc["spec"]["taints"] = spec["taints"]
    if spec.get("unschedulable"):
        doc["spec"]["unschedulable"] = True
    if "ready" in spec:
        doc["status"]["conditions"] = [{"type": "Ready", "status": "True" if spec["ready"] else "False"}]
    return doc


def pod(spec: dict[str, Any]) -> dict[str, Any]:
    ns, name = spec["name"].split("/")
    annotations = dict(spec.get("annotations", {}))
    if spec.get("group"):
        annotations["scheduling.k8s.io/group-name"] = spec["group"]
    labels = dict(spec.get("labels", {}))
    if "role" in spec:
        labels["volcano.sh/task-spec"] = spec["role"]
    container: dict[str, Any] = {"name": "c", "resources": {"requests": spec.get("req", {})}}
    if "limits" in spec:
        container["resources"]["limits"] = spec["limits"]
    if "ports" in spec:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in spec["ports"]]
    containers = [container]
    for i, limits in enumerate(spec.get("more_containers", [])):  # further containers, given by their limits
        containers.append({"name": f"c{i + 1}", "resources": {"limits": limits}})
    pod_spec: dict[str, Any] = {"containers": containers}
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "priorityClassName", "priority",
                "preemptionPolicy"):
        if key in spec:
            pod_spec[key] = spec[key]
    if spec.get("node"):
        pod_spec["nodeName"] = spec["node"]
    meta_extra = {"deletionTimestamp": "2024-01-01T00:00:00Z"} if spec.get("deleting") else {}
    if "created" in spec:  # an RFC 3339 time: orders pods by start where the engine does (victims)
        meta_extra["creationTimestamp"] = spec["created"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "annotations": annotations, "labels": labels,
                     **meta_extra},
        "spec": pod_spec,
        "status": {"phase": spec.get("phase", "Pending")},
    }


def podgroup(spec: dict[str, Any]) -> dict[str, Any]:
    ns, name = spec["name"].split("/")
    pg_spec: dict[str, Any] = {"queue": spec.get("queue", "default"), "minMember": spec.get("min", 0)}
    for key in ("minTaskMember", "minResources", "priorityClassName", "networkTopology", "subGroupPolicy"):
        if key in spec:
            pg_spec[key] = spec[key]
    meta: dict[str, Any] = {"name": name, "namespace": ns, "annotations": spec.get("annotations", {})}
    if "created" in spec:
        meta["creationTimestamp"] = spec["created"]
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": pg_spec,
        "status": {"phase": spec.get("phase", "Inqueue"), **({"conditions": spec["conditions"]}
                                                              if "conditions" in spec else {})},
    }


def queue(spec: dict[str, Any]) -> dict[str, Any]:
    q_spec: dict[str, Any] = {"weight": spec.get("weight", 1)}
    for key in ("capability", "deserved", "reclaimable", "priority", "parent"):
        if key in spec:
            q_spec[key] = spec[key]
    if "guarantee" in spec:
        q_spec["guarantee"] = {"resource": spec["guarantee"]}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": spec["name"], "annotations": spec.get("annotations", {})},
        "spec": q_spec,
        "status": {"state": spec.get("state", "Open")},
    }


def priority_class(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": spec["name"]},
        "value": spec["value"],
    }


def hypernode(spec: dict[str, Any]) -> dict[str, Any]:
    """`{name, tier, tierName?, nodes: [...], hypernodes: [...], regex: [...], members: [raw members]}`."""
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in spec.get("nodes", [])]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": h}}} for h in spec.get("hypernodes", [])]
    members += [{"type": "Node", "selector": {"regexMatch": {"pattern": r}}} for r in spec.get("regex", [])]
    members += spec.get("members", [])
    hn_spec: dict[str, Any] = {"tier": spec["tier"], "members": members}
    if "tierName" in spec:
        hn_spec["tierName"] = spec["tierName"]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": spec["name"]},
            "spec": hn_spec}


def namespace(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": spec["name"], "labels": spec.get("labels", {})}}


def configmap(spec: dict[str, Any]) -> dict[str, Any]:
    ns, name = spec["name"].split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": spec["data"]}


def documents(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    docs = [node(n) for n in scenario.get("nodes", [])]
    docs += [hypernode(h) for h in scenario.get("hypernodes", [])]
    docs += [namespace(n) for n in scenario.get("namespaces", [])]
    docs += [configmap(c) for c in scenario.get("configmaps", [])]
    docs += [queue(q) for q in scenario.get("queues", [])]
    docs += [priority_class(p) for p in scenario.get("priorityClasses", [])]
    docs += [podgroup(g) for g in scenario.get("podgroups", [])]
    docs += [pod(p) for p in scenario.get("pods", [])]
    return docs


def go_tiers(conf: dict[str, Any]) -> dict[str, Any]:
    """`conf` with every flag a plugin entry leaves out set to false: Volcano's unit tests build their tiers in Go,
    where an omitted flag is false (conf files default them to true). Ported rows say `flags: go`."""
    tiers = [
        {"plugins": [{**{flag: False for flag in FLAGS}, **plugin} for plugin in tier["plugins"]]}
        for tier in conf.get("tiers") or []
    ]
    return {**conf, "tiers": tiers}


def registry_with_fakes() -> Registry:
    """The engine's plugins and actions plus the test-only plugins of Volcano's unit tests (fake_plugins.py)."""
    engine = registry()
    return Registry(plugins={**engine.plugins, **FAKE_PLUGINS}, actions=engine.actions,
                    action_arguments=engine.action_arguments)


def _conf(scenario: dict[str, Any]) -> Any:
    raw = go_tiers(scenario["conf"]) if scenario.get("flags") == "go" else scenario["conf"]
    return parse_conf(raw, registry_with_fakes())


def run(scenario: dict[str, Any]) -> Decisions:
    # `now` (epoch seconds) matters only to what decays with time (fairshare's usage records).
    return run_session(build_snapshot(documents(scenario)), _conf(scenario), float(scenario.get("now", 0.0)))


def opened(scenario: dict[str, Any]) -> Session:
    """The scenario's session as it opens, before any action (for filter and score tables)."""
    return open_session(build_snapshot(documents(scenario)), _conf(scenario), float(scenario.get("now", 0.0)))
