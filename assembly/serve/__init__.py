"""`lapilli serve`: the production entry point (the container's command) — assembly of the service's faces.

`Settings` (validated once with `check()`), `build(settings, client)` wires the components, `serve(settings,
stop)` runs them until `stop` is set. Components: the admission caches and the TLS admission webhook; the
extender and controllers are added as further `Component`s.
"""

from assembly.serve.app import Service, build, serve
from assembly.serve.component import Component, run_components
from assembly.serve.settings import Settings, SettingsError, WebhookSettings
from controller.settings import ControllerSettings
from extender.service.settings import ExtenderSettings

__all__ = [
    "Component",
    "ControllerSettings",
    "ExtenderSettings",
    "Service",
    "Settings",
    "SettingsError",
    "WebhookSettings",
    "build",
    "run_components",
    "serve",
]
