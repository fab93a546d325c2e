"""Resource descriptors and URL paths: request building kept apart from I/O (as lightkube does).

A `Resource` names one REST collection (`/api/v1/.../pods`, `/apis/scheduling.volcano.sh/v1beta1/queues`).
The constants below are the collections Lapilli reads or writes; others are one line away.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST collection of the API server."""

    api_version: str  # "v1" for the core group, else "group/version"
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The URL path of the collection, of one object, or of one object's subresource.

        `namespace=None` on a namespaced resource means "across all namespaces" (lists and watches only). An empty
        `name` (what `lapilli.meta.name_of` reads for an object without one) is refused: its path would be the
        collection's, and a DELETE there deletes every object in it.
        """
        root = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        parts = [root]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            if not name:
                raise ValueError(f"a {self.kind} with an empty name")
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        elif subresource:
            raise ValueError("a subresource needs an object name")
        return "/".join(parts)


NAMESPACES: Final = Resource("v1", "namespaces", "Namespace", namespaced=False)
NODES: Final = Resource("v1", "nodes", "Node", namespaced=False)
PODS: Final = Resource("v1", "pods", "Pod")
SERVICES: Final = Resource("v1", "services", "Service")
SERVICE_ACCOUNTS: Final = Resource("v1", "serviceaccounts", "ServiceAccount")
CONFIG_MAPS: Final = Resource("v1", "configmaps", "ConfigMap")
SECRETS: Final = Resource("v1", "secrets", "Secret")
EVENTS: Final = Resource("v1", "events", "Event")
POD_TEMPLATES: Final = Resource("v1", "podtemplates", "PodTemplate")
LEASES: Final = Resource("coordination.k8s.io/v1", "leases", "Lease")
CSI_NODES: Final = Resource("storage.k8s.io/v1", "csinodes", "CSINode", namespaced=False)
PRIORITY_CLASSES: Final = Resource("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", namespaced=False)
CLUSTER_ROLES: Final = Resource("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS: Final = Resource(
    "rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
ROLES: Final = Resource("rbac.authorization.k8s.io/v1", "roles", "Role")
ROLE_BINDINGS: Final = Resource("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding")
CRDS: Final = Resource(
    "apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)
MUTATING_WEBHOOKS: Final = Resource(
    "admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False
)
VALIDATING_WEBHOOKS: Final = Resource(
    "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False
)

FLOW_SCHEMAS: Final = Resource("flowcontrol.apiserver.k8s.io/v1beta1", "flowschemas", "FlowSchema", namespaced=False)

# Volcano's API, served through the CRDs in manifests/crds.
VC_JOBS: Final = Resource("batch.volcano.sh/v1alpha1", "jobs", "Job")
PODGROUPS: Final = Resource("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup")
QUEUES: Final = Resource("scheduling.volcano.sh/v1beta1", "queues", "Queue", namespaced=False)
COMMANDS: Final = Resource("bus.volcano.sh/v1alpha1", "commands", "Command")
HYPERNODES: Final = Resource("topology.volcano.sh/v1alpha1", "hypernodes", "HyperNode", namespaced=False)

_BY_KIND: Final[dict[tuple[str, str], Resource]] = {
    (r.api_version, r.kind): r
    for r in (
        NAMESPACES, NODES, PODS, SERVICES, SERVICE_ACCOUNTS, CONFIG_MAPS, SECRETS, EVENTS, POD_TEMPLATES, LEASES,
        PRIORITY_CLASSES, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS, CRDS, MUTATING_WEBHOOKS,
        VALIDATING_WEBHOOKS, FLOW_SCHEMAS, VC_JOBS, PODGROUPS, QUEUES, COMMANDS, HYPERNODES,
    )
}


def resource_for(api_version: str, kind: str) -> Resource:
    """The collection an object of this apiVersion/kind lives in (for applying manifests)."""
    try:
        return _BY_KIND[(api_version, kind)]
    except KeyError:
        raise KeyError(f"no Resource known for {api_version} {kind}; add it to lapilli.kube.resources") from None
