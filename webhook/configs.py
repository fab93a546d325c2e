"""The Mutating/ValidatingWebhookConfigurations (`admissionregistration.k8s.io/v1`) that route reviews here.

Rendered from `webhook.routes.ROUTES`, so every path is registered with its name, resource and operations:
* Volcano resources (Jobs, Queues, PodGroups): `failurePolicy: Fail` — a Job must never skip its defaults or
  rules;
* Pods: `failurePolicy: Ignore` and an `objectSelector` for pods of Volcano Jobs (`volcano.sh/job-name` exists),
  so a Lapilli outage never blocks pod creation cluster-wide (volcano#3734); with resource groups
  (`--admission-conf`) the mutating pod webhook must see every pod, so `all_pods` renders it without one;
* all: `sideEffects: None`, `admissionReviewVersions: [v1]`, `matchPolicy: Equivalent`, `timeoutSeconds: 10`,
  and a `namespaceSelector` skipping namespaces labelled `lapilli.io/webhook: disabled`. Kubernetes 1.20 has
  no automatic `kubernetes.io/metadata.name` label, so the install puts that label on `kube-system` and on
  Lapilli's own namespace. Queues are cluster-scoped: namespace selectors do not apply to them.

`render(url=...)` points every webhook at `https://127.0.0.1:PORT/<path>` (the dev cluster has no Service
networking); `render(service=...)` at a Service (production; `caBundle` is patched in at start or injected
by cert-manager).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Final

from webhook.routes import ROUTES, Route

OPT_OUT_LABEL: Final = "lapilli.io/webhook"
OPT_OUT_VALUE: Final = "disabled"
MUTATING_NAME: Final = "lapilli-mutating"
VALIDATING_NAME: Final = "lapilli-validating"
API_VERSION: Final = "admissionregistration.k8s.io/v1"
TIMEOUT_SECONDS: Final = 10


@dataclass(frozen=True, slots=True)
class ServiceRef:
    """Where the apiserver reaches the webhook inside the cluster."""

    namespace: str = "lapilli-system"
    name: str = "lapilli-webhook"
    port: int = 443


def namespace_selector() -> dict[str, Any]:
    return {"matchExpressions": [{"key": OPT_OUT_LABEL, "operator": "NotIn", "values": [OPT_OUT_VALUE]}]}


def _client_config(route: Route, url: str | None, service: ServiceRef | None, ca_bundle: bytes) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if url is not None:
        config["url"] = url.rstrip("/") + route.path
    else:
        ref = service or ServiceRef()
        config["service"] = {"namespace": ref.namespace, "name": ref.name, "path": route.path, "port": ref.port}
    if ca_bundle:
        config["caBundle"] = base64.b64encode(ca_bundle).decode("ascii")
    return config


def webhook_entry(route: Route, url: str | None, service: ServiceRef | None, ca_bundle: bytes,
                  all_pods: bool = False) -> dict[str, Any]:
    """One `webhooks[]` item for `route` (`all_pods`: the mutating pod webhook sees pods of any Job or none)."""
    target = route.target
    is_pods = target.resource == "pods"
    entry: dict[str, Any] = {
        "name": route.name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore" if is_pods else "Fail",
        "matchPolicy": "Equivalent",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "clientConfig": _client_config(route, url, service, ca_bundle),
        "rules": [
            {
                "operations": list(route.operations),
                "apiGroups": [target.group],
                "apiVersions": [target.version],
                "resources": [target.resource],
                "scope": "Cluster" if target.cluster_scoped else "Namespaced",
            }
        ],
        "namespaceSelector": namespace_selector(),
    }
    if is_pods and not (all_pods and route.mutating):
        entry["objectSelector"] = {"matchExpressions": [{"key": "volcano.sh/job-name", "operator": "Exists"}]}
    if route.mutating:
        entry["reinvocationPolicy"] = "Never"
    return entry


def render(
    *,
    url: str | None = None,
    service: ServiceRef | None = None,
    ca_bundle: bytes = b"",
    labels: dict[str, str] | None = None,
    names: tuple[str, str] = (MUTATING_NAME, VALIDATING_NAME),
    all_pods: bool = False,
) -> list[dict[str, Any]]:
    """[MutatingWebhookConfiguration, ValidatingWebhookConfiguration] for `url` (a base such as
    `https://127.0.0.1:8443`) or `service`, trusting the PEM `ca_bundle` (empty: the apiserver's own roots).
    `names` are the two configurations' names (defaults `lapilli-mutating`, `lapilli-validating`)."""
    if url is not None and not url.startswith("https://"):
        raise ValueError(f"webhook URLs must be https://, got {url!r}")
    metadata_labels = {"app.kubernetes.io/name": "lapilli", **(labels or {})}
    out = []
    for kind, name, mutating in (
        ("MutatingWebhookConfiguration", names[0], True),
        ("ValidatingWebhookConfiguration", names[1], False),
    ):
        webhooks = [webhook_entry(r, url, service, ca_bundle, all_pods) for r in ROUTES if r.mutating == mutating]
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": kind,
                "metadata": {"name": name, "labels": dict(metadata_labels)},
                "webhooks": webhooks,
            }
        )
    return out


def ca_bundle_patch(config: dict[str, Any], ca_bundle: bytes) -> list[dict[str, Any]]:
    """JSON-patch ops setting `clientConfig.caBundle` of every webhook of `config` that does not already trust
    `ca_bundle` (PEM); empty when nothing needs to change. Counterpart: Volcano's webhook-manager start-up patch."""
    encoded = base64.b64encode(ca_bundle).decode("ascii")
    ops: list[dict[str, Any]] = []
    for i, hook in enumerate(config.get("webhooks") or []):
        client_config = hook.get("clientConfig") or {}
        if client_config.get("caBundle") != encoded:
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded})
    return ops
