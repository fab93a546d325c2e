"""The assembly: build the service's components from `Settings` and run them until told to stop.

The cluster caches admission reads, then the admission webhook (TLS, every replica), the extender (plain
HTTP on its own port, answered by the holder of its Lease only) and the controllers (run by the holder of
theirs only), each built here from its own settings group; `/healthz`, `/readyz` and `/metrics` cover all of
them. The two Leases are separate, so one replica may lead either or both; the process has one identity in
both, and `lapilli_leader` on /metrics tells which it holds.

Deployed (manifests/), one process runs the webhook and the controllers (`--disable-extender`, its certificate
kept in a Secret with `--tls-secret`), and another runs the extender beside kube-scheduler (`--disable-webhook`,
`--follow-scheduler-lease`: it leads while that kube-scheduler does, and /healthz, /readyz, /metrics move to a
plain-HTTP `--metrics-port`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from assembly.serve.cabundle import CaBundleSync
from assembly.serve.caches import AdmissionCaches
from assembly.serve.certsecret import SecretRef, ServingCertSecret
from assembly.serve.component import Component, run_components
from assembly.serve.extender_tls import ExtenderCertReload
from assembly.serve.ops import Ops, OpsServer
from assembly.serve.settings import Settings
from assembly.serve.webhook import Background, WebhookServer
from controller import Controllers
from extender.service.component import ExtenderComponent
from lapilli.cluster import LeaderGauge, LeaseElector, Shared, default_identity
from lapilli.cluster.follower import LeaseFollower
from lapilli.cluster.leader import IDENTITY_ENV
from lapilli.kube import KubeClient, load_config
from webhook import resourcegroups as resource_groups
from webhook.context import AdmissionContext

log = logging.getLogger("lapilli.serve")


@dataclass
class Service:
    """The built service: its components in start order and what they share."""

    settings: Settings
    client: KubeClient
    registry: CollectorRegistry
    components: list[Component] = field(default_factory=list)

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)


def build(settings: Settings, client: KubeClient) -> Service:
    """Wire the components (no I/O happens until they start)."""
    service = Service(settings, client, CollectorRegistry())
    ops = Ops(service.registry, lambda: service.components)
    # One list and watch of each kind for the whole process: the admission caches, the extender's cluster state and
    # the controllers' warm caches read the same Pods, PodGroups, Queues, PriorityClasses, Jobs and Namespaces.
    shared = Shared(client)
    if settings.webhook.enabled:
        service.components += _webhook(settings, client, service.registry, ops, shared)
    else:
        service.components.append(OpsServer(ops, settings.metrics_host, settings.metrics_port))
    elect = _Electors(client, service.registry, settings.leader_identity)
    e, c = settings.extender, settings.controllers
    if e.enabled:
        elector: LeaseElector | None = None
        if e.follow_lease is not None:
            elector = elect.follow(e.lease_namespace, e.follow_lease)
        elif e.leader_elect:
            elector = elect(e.lease_namespace, e.lease_name)
        extender = ExtenderComponent(e, client, service.registry, elector, kubeconfig=settings.kubeconfig,
                                     shared=shared)
        if extender.tls is not None and e.tls_cert_file is not None and e.tls_key_file is not None:
            service.components.append(ExtenderCertReload(extender.tls, e.tls_cert_file, e.tls_key_file,
                                                         service.registry, settings.webhook.tls_reload_interval_s))
        service.components.append(extender)
    if c.enabled:  # after the webhook: the pods they create are admitted by it
        elector = elect(c.lease_namespace, c.lease_name) if c.leader_elect else None
        service.components.append(Controllers(client, c, service.registry, elector, shared))
    return service


def serving_cert_secret(settings: Settings, client: KubeClient) -> ServingCertSecret | None:
    w = settings.webhook
    if not w.enabled or w.tls_secret is None:
        return None
    return ServingCertSecret(client, SecretRef.parse(w.tls_secret), w.tls_service, cert_file=w.tls_cert_file,
                             key_file=w.tls_key_file, ca_file=w.ca_bundle_file)


def _webhook(settings: Settings, client: KubeClient, registry: CollectorRegistry, ops: Ops,
             shared: Shared) -> list[Component]:
    """The admission caches and the TLS webhook, with the loops that keep its certificate and caBundle."""
    w = settings.webhook
    caches = AdmissionCaches(client, w.cache_sync_timeout_s, shared)
    context = AdmissionContext(settings=w.admission, queues=caches.queues, jobs=caches.jobs,
                               namespaces=caches.namespaces, hypernodes=caches.hypernodes,
                               resource_groups=resource_groups.watched(w.admission.admission_conf))
    background: list[Background] = []
    if (secret := serving_cert_secret(settings, client)) is not None:
        background.append(secret.run)
    if w.ca_bundle_file is not None:
        background.append(CaBundleSync(client, w.ca_bundle_file, w.configurations).run)
    webhook = WebhookServer(w, context, registry, extra_routes=ops.add_routes, background=tuple(background))
    return [caches, webhook]


class _Electors:
    """Electors of one process: one identity for all its Leases, each tracked on the `lapilli_leader` gauge."""

    def __init__(self, client: KubeClient, registry: CollectorRegistry, identity: str = "") -> None:
        # `lapilli dev supervise` names its children so, as a pod's containers share the pod's name.
        identity = identity or os.environ.get(IDENTITY_ENV, "") or default_identity()
        self.client, self.identity, self.gauge = client, identity, LeaderGauge(registry)

    def __call__(self, namespace: str, name: str) -> LeaseElector:
        elector = LeaseElector(self.client, namespace, name, identity=self.identity)
        self.gauge.track(elector)
        return elector

    def follow(self, namespace: str, name: str) -> LeaseFollower:
        """Leadership of the kube-scheduler beside this process (its Lease `namespace/name`)."""
        follower = LeaseFollower(self.client, namespace, name)
        self.gauge.track(follower)
        return follower


async def serve(settings: Settings, stop: asyncio.Event) -> None:
    """Run the service until `stop` is set. `settings` must have passed `check()`."""
    async with KubeClient(load_config(settings.kubeconfig)) as client:
        if (secret := serving_cert_secret(settings, client)) is not None:
            # Before the webhook starts: it serves from the files this writes.
            await secret.ensure_until_done()
        await run_components(build(settings, client).components, stop)
