"""The admission face: Volcano's validating and mutating webhooks for Jobs, Queues, PodGroups and Pods.

Rules (`webhook.jobs`, `webhook.queues`, `webhook.podgroups`, `webhook.pods`) are plain functions from an
`AdmissionRequest` and an `AdmissionContext` (settings + read-only listers) to an `Outcome`; `webhook.routes`
names them, `webhook.server` serves them over aiohttp, `webhook.configs` renders their registrations,
`webhook.certs`/`webhook.tls` make and reload the serving certificate. Counterpart: Volcano's
`pkg/webhooks/admission/**` and its ValidatingAdmissionPolicies.
"""
