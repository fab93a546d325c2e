"""Least privilege (issue 12 item 7): every Role and ClusterRole the install renders is exactly the API calls the
code makes.

`CALLS` is the table (written as plain tuples in `_TABLE`): for each role (`Kind/name`), every (API group, resources, verbs, resourceNames) it grants,
with where in the code the call is made (a file and a pattern that must be found there). The tests fail when
- the install (or an overlay of it) renders a Role or ClusterRole the table does not hold, or binds a role that is
  neither in the table nor one of kube-scheduler's own built-in roles (`BUILT_IN`);
- a role grants a verb the table does not list (a rule nothing uses), or misses one it lists, or names its objects
  differently (a rule widened from some objects to all of them);
- a table entry's call is no longer in the code (the rule it justifies has become unused);
- the code makes a direct call (`client.<verb>(RESOURCE, ...)`, a Reflector, a status patch) on a resource and
  verb the table does not list for that component (a new call without its rule).
"""

from __future__ import annotations

import re
from itertools import product
from typing import NamedTuple

import pytest

from controller.jobs import resources as job_resources
from lapilli.kube import resources as kube_resources
from lapilli.kube.resources import Resource
from tests.install.manifests import INSTALL, ROOT, TREES, find, render

ROLE_KINDS = ("ClusterRole", "Role")


class Call(NamedTuple):
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    where: str  # a file or directory of the code
    pattern: str  # the call, as a regular expression over `where`'s text
    names: tuple[str, ...] = ()  # resourceNames; () = every object of the resources


_TABLE: dict[str, list[tuple]] = {
    "ClusterRole/lapilli-webhook": [
        ("scheduling.volcano.sh", ("queues",), ("list", "watch"), "assembly/serve/caches.py", r"[Rr]eflector\((?:client, )?QUEUES"),
        ("batch.volcano.sh", ("jobs",), ("list", "watch"), "assembly/serve/caches.py", r"[Rr]eflector\((?:client, )?VC_JOBS"),
        ("", ("namespaces",), ("list", "watch"), "assembly/serve/caches.py", r"[Rr]eflector\((?:client, )?NAMESPACES"),
        ("topology.volcano.sh", ("hypernodes",), ("list", "watch"), "assembly/serve/caches.py",
         r"Reflector\(client, HYPERNODES"),
        ("admissionregistration.k8s.io", ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"),
         ("get", "patch"), "assembly/serve/cabundle.py",
         r"client\.get\(resource, name\)[\s\S]*client\.patch\(resource, name",
         ("lapilli-mutating", "lapilli-validating")),
    ],
    "ClusterRole/lapilli-controllers": [
        ("batch.volcano.sh", ("jobs",), ("list", "watch"), "controller/warm.py", r"KINDS: .*= \(.*\bVC_JOBS\b"),
        ("batch.volcano.sh", ("jobs",), ("get",), "controller/jobs/cleanup.py", r"client\.get\(VC_JOBS"),
        ("batch.volcano.sh", ("jobs",), ("patch",), "controller/jobs/resources.py", r"client\.patch\(VC_JOBS"),
        ("batch.volcano.sh", ("jobs",), ("delete",), "controller/jobs/ttl.py", r"client\.delete\(VC_JOBS"),
        ("batch.volcano.sh", ("jobs/status",), ("patch",), "controller/jobs/actions.py",
         r"client\.patch\(VC_JOBS, .*subresource=subresource"),
        ("scheduling.volcano.sh", ("podgroups",), ("list", "watch"), "controller/warm.py",
         r"KINDS: .*= \(.*\bPODGROUPS\b"),
        ("scheduling.volcano.sh", ("podgroups",), ("create", "patch", "delete"), "controller/jobs/actions.py",
         r"client\.create\(PODGROUPS[\s\S]*client\.patch\(PODGROUPS[\s\S]*client\.delete\(PODGROUPS"),
        ("scheduling.volcano.sh", ("podgroups",), ("get",), "controller", r"client\.get\(PODGROUPS"),
        ("scheduling.volcano.sh", ("queues",), ("list", "watch"), "controller/warm.py", r"KINDS: .*= \(.*\bQUEUES\b"),
        ("scheduling.volcano.sh", ("queues",), ("get", "create", "patch"), "controller",
         r"client\.get\(QUEUES|client\.create\(QUEUES|client\.patch\(QUEUES"),
        ("scheduling.volcano.sh", ("queues/status",), ("patch",), "controller/queues/controller.py",
         r"client\.patch_status\(QUEUES"),
        ("bus.volcano.sh", ("commands",), ("list", "watch"), "controller/manager.py", r"Reflector\(client, COMMANDS"),
        ("bus.volcano.sh", ("commands",), ("delete",), "controller/commands.py", r"client\.delete\(COMMANDS"),
        ("", ("pods",), ("list", "watch"), "controller/warm.py", r"KINDS: .*= \(.*\bPODS\b"),
        ("", ("pods",), ("create", "patch", "delete"), "controller/jobs/actions.py",
         r"client\.create\(PODS[\s\S]*client\.patch\(PODS[\s\S]*client\.delete\(PODS"),
        ("scheduling.k8s.io", ("priorityclasses",), ("list", "watch"), "controller/warm.py",
         r"KINDS: .*= \(.*\bPRIORITY_CLASSES\b"),
        # Plugin objects: created from the plugins' wants, read and deleted by name (delete_owned).
        ("", ("services", "secrets", "configmaps"), ("create",), "controller/jobs/resources.py",
         r"client\.create\(_BY_KIND\["),
        ("networking.k8s.io", ("networkpolicies",), ("create",), "controller/jobs/resources.py",
         r"client\.create\(_BY_KIND\["),
        ("", ("services", "secrets", "configmaps"), ("get", "delete"), "controller/jobs/resources.py",
         r"client\.get\(res, name, namespace\)[\s\S]*client\.delete\(res, name"),
        ("networking.k8s.io", ("networkpolicies",), ("get", "delete"), "controller/jobs/resources.py",
         r"client\.get\(res, name, namespace\)[\s\S]*client\.delete\(res, name"),
        ("", ("configmaps",), ("patch",), "controller/jobs/resources.py", r"client\.patch\(CONFIG_MAPS"),
        ("", ("persistentvolumeclaims",), ("get", "create"), "controller/jobs/resources.py",
         r"client\.get\(PVCS[\s\S]*client\.create\(PVCS"),
        ("", ("persistentvolumeclaims",), ("list", "delete"), "controller/jobs/cleanup.py",
         r"(?s)(?=.*SWEPT: .*= \(PVCS,\))(?=.*client\.list\(res\))(?=.*client\.delete\(res)"),
        ("", ("events",), ("create", "patch"), "lapilli/kube/events.py", r"client\.patch\(EVENTS[\s\S]*create\(EVENTS"),
        # The owner of a plain pod, read for scheduling.volcano.sh/group-min-member (controller/podgroups/plain.py).
        ("apps", ("replicasets", "statefulsets", "deployments", "daemonsets"), ("get",), "controller/podgroups",
         r"client\.get\(res, str\(owner"),
        ("batch", ("jobs",), ("get",), "controller/podgroups/plain.py", r'"Job": "jobs"'),
        ("", ("replicationcontrollers",), ("get",), "controller/podgroups/plain.py",
         r'"ReplicationController": "replicationcontrollers"'),
        # HyperNodes: the node count over the nodes, and discovery from node labels (controller/hypernodes).
        ("", ("nodes",), ("list", "watch"), "controller/manager.py", r"Reflector\(client, NODES"),
        ("topology.volcano.sh", ("hypernodes",), ("list", "watch"), "controller/manager.py",
         r"Reflector\(client, HYPERNODES"),
        ("topology.volcano.sh", ("hypernodes",), ("create", "patch", "delete"), "controller/hypernodes/controller.py",
         r"client\.delete\(HYPERNODES[\s\S]*client\.patch\(HYPERNODES[\s\S]*client\.create\(HYPERNODES"),
        ("topology.volcano.sh", ("hypernodes/status",), ("patch",), "controller/hypernodes/controller.py",
         r"client\.patch_status\(HYPERNODES"),
    ],
    "ClusterRole/lapilli-extender": [
        ("", ("nodes", "pods"), ("list", "watch"), "extender/service/state.py", r"WATCHED.*NODES, PODS"),
        ("scheduling.volcano.sh", ("podgroups", "queues"), ("list", "watch"), "extender/service/state.py",
         r"WATCHED.*PODGROUPS, QUEUES"),
        ("scheduling.k8s.io", ("priorityclasses",), ("list", "watch"), "extender/service/state.py",
         r"WATCHED.*PRIORITY_CLASSES"),
        ("", ("namespaces",), ("list", "watch"), "extender/service/state.py", r"WATCHED.*NAMESPACES"),
        ("topology.volcano.sh", ("hypernodes",), ("list", "watch"), "extender/service/state.py",
         r"WATCHED.*HYPERNODES"),
        ("", ("pods",), ("get",), "extender/service", r"client\.get\(PODS"),
        ("", ("pods",), ("patch",), "extender/service/loop.py", r"client\.patch\(PODS"),
        ("", ("pods/binding",), ("create",), "extender/service/core.py", r"client\.bind\("),
        ("", ("pods/eviction",), ("create",), "extender/service/loop.py", r"client\.evict\("),
        ("scheduling.volcano.sh", ("podgroups/status", "queues/status"), ("patch",), "extender/service/loop.py",
         r'kinds = \{"PodGroup": PODGROUPS, "Queue": QUEUES\}[\s\S]*client\.patch_status\(res'),
        ("", ("events",), ("create", "patch"), "extender/service/loop.py", r"EventRecorder"),
        ("scheduling.volcano.sh", ("queues",), ("patch",), "extender/service/usage.py", r"client\.patch\(QUEUES"),
    ],
    # The webhook's serving certificate: its one Secret read and renewed by name, created once (no list).
    "Role/lapilli-webhook-tls": [
        ("", ("secrets",), ("get", "update"), "assembly/serve/certsecret.py",
         r"client\.get\(SECRETS, self\.secret\.name[\s\S]*client\.replace\(SECRETS", ("lapilli-webhook-tls",)),
        ("", ("secrets",), ("create",), "assembly/serve/certsecret.py", r"client\.create\(SECRETS"),
    ],
    # The why pass names who closed a queue from the CloseQueue Events about Queues, recorded in `default`.
    "Role/lapilli-queue-events": [
        ("", ("events",), ("list",), "extender/service/why.py", r'client\.list\(EVENTS, "default"'),
    ],
    # The dashboard's history: one ConfigMap in lapilli-system, read and rewritten by name, created once.
    "Role/lapilli-history": [
        ("", ("configmaps",), ("get", "patch"), "extender/service/history.py",
         r"client\.get\(CONFIG_MAPS, HISTORY_CONFIGMAP[\s\S]*client\.patch\(CONFIG_MAPS, HISTORY_CONFIGMAP",
         ("lapilli-history",)),
        ("", ("configmaps",), ("create",), "extender/service/history.py", r"client\.create\(CONFIG_MAPS"),
    ],
    # The vGPU device config, followed by name (a field selector on metadata.name) in kube-system.
    "Role/lapilli-vgpu-config": [
        ("", ("configmaps",), ("list", "watch"), "extender/service/state.py", r"Reflector\(client, CONFIG_MAPS",
         ("volcano-vgpu-device-config",)),
    ],
    # HyperNode discovery's configuration, watched by name (the install's --hypernode-discovery-configmap).
    "Role/lapilli-hypernode-discovery": [
        ("", ("configmaps",), ("list", "watch"), "controller/manager.py",
         r'Reflector\(client, CONFIG_MAPS, namespace=where\[0\],\s+field_selector=f"metadata.name=',
         ("volcano-controller-configmap",)),
    ],
    # Leases: the controllers' and the extender's electors (the extender's follower reads kube-scheduler's).
    "Role/lapilli-leader-election": [
        ("coordination.k8s.io", ("leases",), ("get", "create", "update"), "lapilli/cluster/leader.py",
         r"client\.get\(LEASES[\s\S]*client\.replace\(LEASES[\s\S]*client\.create\(LEASES"),
    ],
}
CALLS: dict[str, list[Call]] = {role: [Call(*c) for c in calls] for role, calls in _TABLE.items()}
# Roles the install binds without rendering them: kube-scheduler's own (its dedicated instance needs what the stock
# one has), each with what it is for.
BUILT_IN = {
    "ClusterRole/system:kube-scheduler": "kube-scheduler's own permissions",
    "ClusterRole/system:volume-scheduler": "kube-scheduler's volume binding",
    "Role/extension-apiserver-authentication-reader": "kube-scheduler reads the authentication ConfigMap",
}
# Where each component's direct calls are looked for (the reverse check).
CODE: dict[str, tuple[str, ...]] = {
    "ClusterRole/lapilli-webhook": ("webhook", "assembly/serve/caches.py", "assembly/serve/cabundle.py"),
    "ClusterRole/lapilli-controllers": ("controller",),
    "ClusterRole/lapilli-extender": ("extender/service",),
    "Role/lapilli-webhook-tls": ("assembly/serve/certsecret.py",),
    "Role/lapilli-queue-events": ("extender/service/why.py",),
    "Role/lapilli-history": ("extender/service/history.py",),
    "Role/lapilli-vgpu-config": ("extender/service/state.py",),
    "Role/lapilli-hypernode-discovery": ("controller/manager.py",),
    "Role/lapilli-leader-election": ("lapilli/cluster/leader.py", "lapilli/cluster/follower.py"),
}
_VERB_OF = {"get": "get", "list": "list", "watch": "watch", "create": "create", "replace": "update",
            "patch": "patch", "delete": "delete"}
Grant = tuple[str, str, str, str]  # group, resource, verb, resourceName ("" = every object)


def _role_id(obj: dict) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _table(role: str) -> set[tuple[str, str, str]]:
    return {(c.group, r, v) for c in CALLS[role] for r, v in product(c.resources, c.verbs)}


def _table_grants(role: str) -> set[Grant]:
    return {(c.group, r, v, n) for c in CALLS[role] for r, v, n in product(c.resources, c.verbs, c.names or ("",))}


def _grants(rules: list[dict]) -> set[Grant]:
    return {(g, r, v, n) for rule in rules
            for g, r, v, n in product(rule["apiGroups"], rule["resources"], rule["verbs"],
                                      rule.get("resourceNames") or ("",))}


def _text(where: str) -> str:
    path = ROOT / where
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return "\n".join(f.read_text() for f in files)


@pytest.mark.parametrize("tree", sorted(TREES))
def test_every_role_rendered_or_bound_is_in_the_table(tree):
    objects = render(tree)
    rendered = {_role_id(o) for o in objects if o["kind"] in ROLE_KINDS}
    assert rendered - set(CALLS) == set(), f"manifests/{tree}: roles with no table of calls: {sorted(rendered - set(CALLS))}"
    assert set(CALLS) - rendered == set(), f"manifests/{tree}: table roles not rendered: {sorted(set(CALLS) - rendered)}"
    bound = {f"{o['roleRef']['kind']}/{o['roleRef']['name']}" for o in objects
             if o["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert bound - rendered - set(BUILT_IN) == set(), f"manifests/{tree}: binds {sorted(bound - rendered - set(BUILT_IN))}"


@pytest.mark.parametrize(("tree", "role"), list(product(sorted(TREES), sorted(CALLS))))
def test_each_role_is_exactly_the_calls_the_code_makes(tree, role):
    kind, name = role.split("/", 1)
    granted, used = _grants(find(render(tree), kind, name)["rules"]), _table_grants(role)
    assert granted - used == set(), f"{role} grants what no code calls: {sorted(granted - used)}"
    assert used - granted == set(), f"{role} lacks what the code calls: {sorted(used - granted)}"


@pytest.mark.parametrize(("role", "index"), [(r, i) for r, calls in CALLS.items() for i in range(len(calls))])
def test_every_call_in_the_table_is_still_in_the_code(role, index):
    call = CALLS[role][index]
    assert re.search(call.pattern, _text(call.where)), \
        f"{role}: {call.verbs} on {call.group}/{call.resources} no longer at {call.where}"


def _constants() -> dict[str, Resource]:
    return {name: value for module in (kube_resources, job_resources) for name, value in vars(module).items()
            if isinstance(value, Resource)}


def _direct_calls(text: str) -> set[tuple[str, str, str]]:
    constants, found = _constants(), set()
    for method, name in re.findall(r"client\.(get|list|watch|create|replace|patch|delete)\(([A-Z_]+)\b", text):
        if name in constants:
            found.add((constants[name].group, constants[name].plural, _VERB_OF[method]))
    for name in re.findall(r"client\.patch_status\(([A-Z_]+)\b", text):
        if name in constants:
            found.add((constants[name].group, f"{constants[name].plural}/status", "patch"))
    for name in re.findall(r"Reflector\(\w+, ([A-Z_]+)\b", text):
        if name in constants:
            found |= {(constants[name].group, constants[name].plural, v) for v in ("list", "watch")}
    return found


def _within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


def _inside(role: str, other: str) -> bool:
    return all(any(_within(w, o) for o in CODE[other]) for w in CODE[role])


def _same_component(role: str) -> list[str]:
    """Roles of the same component as `role`: one's code lies inside the other's (the extender's Role for Queue
    Events in `default` beside its ClusterRole). The component's code may make any call either grants."""
    return [r for r in CODE if r != role and (_inside(r, role) or _inside(role, r))]


@pytest.mark.parametrize("role", sorted(CODE))
def test_every_direct_call_in_the_code_is_in_the_table(role):
    calls = set().union(*(_direct_calls(_text(where)) for where in CODE[role]))
    assert calls, f"no calls found in {CODE[role]}: the scan is broken"
    allowed = _table(role).union(*(_table(r) for r in _same_component(role)))
    assert calls - allowed == set(), f"{role}: calls without a rule: {sorted(calls - allowed)}"


def test_no_cluster_wide_secret_list_and_webhook_configurations_by_name_only():
    objects = render(INSTALL)
    for role in (o for o in objects if o["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            if "secrets" in rule["resources"]:
                assert not {"list", "watch"} & set(rule["verbs"]), role["metadata"]["name"]
            if any(r.endswith("webhookconfigurations") for r in rule["resources"]):
                assert rule.get("resourceNames") == ["lapilli-mutating", "lapilli-validating"]
    assert not any("*" in str(r) for o in objects if o["kind"] in ("ClusterRole", "Role") for r in o["rules"])
