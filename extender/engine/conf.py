"""Volcano's scheduler configuration, parsed verbatim (`pkg/scheduler/conf/scheduler_conf.go`).

`actions: "enqueue, allocate, backfill"`, `tiers: [{plugins: [{name, arguments, enableXxx…}]}]` and
`configurations: [{name: <action>, arguments}]`. Every `enableXxx` flag omitted in a file defaults to true
(`plugins/defaults.go`); `false` removes that plugin's callback of that kind. Unknown actions, plugins or flags and
`drf` with `enableHierarchy` next to `proportion` in one tier are rejected with a readable `ConfError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

# The flag keys exactly as spelled in Volcano's YAML.
FLAGS: Final = (
    "enableJobOrder",
    "enableHierarchy",
    "enableJobReady",
    "enableJobPipelined",
    "enableTaskOrder",
    "enablePreemptable",
    "enableReclaimable",
    "enablePreemptive",
    "enableQueueOrder",
    "enabledClusterOrder",
    "enablePredicate",
    "enableBestNode",
    "enableNodeOrder",
    "enableTargetJob",
    "enableReservedNodes",
    "enableJobEnqueued",
    "enabledVictim",
    "enableJobStarving",
    "enabledOverused",
    "enabledAllocatable",
    "enabledHyperNodeOrder",
    "enabledSubJobReady",
    "enabledSubJobPipelined",
    "enabledSubJobOrder",
    "enabledHyperNodeGradient",
)

KNOWN_ACTIONS: Final = ("enqueue", "allocate", "backfill", "preempt", "reclaim")

DEFAULT_CONF: Final = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


class ConfError(ValueError):
    """A scheduler configuration that cannot be used as written."""


@dataclass(frozen=True, slots=True)
class PluginOption:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    flags: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, flag: str) -> bool:
        return self.flags.get(flag, True)


@dataclass(frozen=True, slots=True)
class Tier:
    plugins: tuple[PluginOption, ...]


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]

    def action_arguments(self, action: str) -> Mapping[str, Any]:
        return self.configurations.get(action, {})


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfError(f"{where}: expected true or false, got {value!r}")


def _plugin(raw: Any, where: str, known_plugins: frozenset[str]) -> PluginOption:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ConfError(f"{where}: a plugin needs a `name`")
    name = raw["name"]
    if name not in known_plugins:
        raise ConfError(f"{where}: unknown plugin {name!r} (known: {', '.join(sorted(known_plugins))})")
    flags: dict[str, bool] = {}
    arguments: Mapping[str, Any] = {}
    for key, value in raw.items():
        if key == "name":
            continue
        if key == "arguments":
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfError(f"{where} ({name}): `arguments` must be a mapping")
            arguments = dict(value)
        elif key in FLAGS:
            flags[key] = _bool(value, f"{where} ({name}).{key}")
        else:
            raise ConfError(f"{where} ({name}): unknown field {key!r}")
    return PluginOption(name=name, arguments=arguments, flags=flags)


def parse_conf(raw: Any, known_plugins: frozenset[str]) -> SchedulerConf:
    """Validate a decoded configuration document. `known_plugins` comes from the plugin registry."""
    if not isinstance(raw, Mapping):
        raise ConfError("configuration: expected a mapping with `actions` and `tiers`")
    actions_raw = raw.get("actions", "")
    if not isinstance(actions_raw, str):
        raise ConfError("actions: expected a comma-separated string such as \"enqueue, allocate, backfill\"")
    actions = tuple(a.strip() for a in actions_raw.split(",") if a.strip())
    for action in actions:
        if action not in KNOWN_ACTIONS:
            raise ConfError(f"actions: unknown action {action!r} (known: {', '.join(KNOWN_ACTIONS)})")
    tiers_raw = raw.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfError("tiers: expected a list of {plugins: [...]}")
    tiers: list[Tier] = []
    for ti, tier in enumerate(tiers_raw):
        plugins_raw = tier.get("plugins") if isinstance(tier, Mapping) else None
        if not isinstance(plugins_raw, list):
            raise ConfError(f"tiers[{ti}]: expected `plugins: [...]`")
        plugins = tuple(_plugin(p, f"tiers[{ti}].plugins[{pi}]", known_plugins) for pi, p in enumerate(plugins_raw))
        names = {p.name for p in plugins}
        if "proportion" in names and any(p.name == "drf" and p.flags.get("enableHierarchy") for p in plugins):
            raise ConfError(f"tiers[{ti}]: drf with enableHierarchy and proportion cannot be in the same tier")
        tiers.append(Tier(plugins=plugins))
    configurations: dict[str, Mapping[str, Any]] = {}
    for ci, item in enumerate(raw.get("configurations") or []):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise ConfError(f"configurations[{ci}]: expected {{name: <action>, arguments: {{...}}}}")
        configurations[item["name"]] = dict(item.get("arguments") or {})
    return SchedulerConf(actions=actions, tiers=tuple(tiers), configurations=configurations)


def load_conf(text: str | None, known_plugins: frozenset[str]) -> SchedulerConf:
    """Parse YAML text; None or blank means Volcano's default configuration."""
    if text is None or not text.strip():
        text = DEFAULT_CONF
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"configuration is not valid YAML: {exc}") from exc
    return parse_conf(raw, known_plugins)
