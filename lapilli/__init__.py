"""Lapilli's kernel: what the faces (extender, webhook, controller) share, importing none of them.

`api` (Volcano's API as pydantic models, constants), `resources` (quantities, resource vectors, a pod's sum),
`nodematch` (node selectors, affinity terms, taints and tolerations, typed), `jobplugins` (the pure job plugins),
`kube` (the raw-JSON client, errors, events), `cluster` (reflectors, the rate-limited work queue, Lease election),
and one of each small helper: `meta` (object metadata of raw dicts), `times`
(RFC 3339 times, Go durations), `settings` (settings fields that are command-line flags) and `tasks` (stopping
background tasks).
"""
