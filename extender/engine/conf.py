"""Volcano's scheduler configuration, validated when it is loaded (`pkg/scheduler/conf/scheduler_conf.go`).

`actions: "enqueue, allocate, backfill"` and `tiers: [{plugins: [{name, arguments, enableXxx…}]}]`. Every
`enableXxx` flag omitted in a file defaults to true (`plugins/defaults.go`); `false` removes that plugin's callback
of that kind. Each plugin's `arguments` are parsed here by the parser the plugin registered (`arguments.py`), into a
frozen value its builder keeps, as scheduler-plugins validates args when a plugin is built.

Refused with one readable `ConfError` line: a file that is empty or not YAML, a malformed `actions`/`tiers`, an
unknown `enableXxx` field, a flag that is not true/false, an argument that cannot be read (`plugin binpack:
argument binpack.weight: "abc" is not a number`), and `drf` with `enableHierarchy` next to `proportion` in one tier.
An action or plugin name that is not offered is left out with a warning (`SchedulerConf.warnings`), and the rest
runs, as Volcano's scheduler logs "Failed to find Action" / "Failed to get plugin" and goes on.

`configurations: [{name: <action>, arguments: {...}}]` (per-action arguments) is read for the actions that register
a parser (gangpreempt, gangreclaim: `maxDomains`, `allowWholeBundle`), once, at load: a value that cannot be read is
refused, one Volcano replaces by its default is taken with a warning. Other actions' entries are accepted and not
read: Volcano reads them for options Lapilli's actions do not have (topology-aware preemption, candidate-node limits,
the predicate error cache).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Final

import yaml

from extender.engine.arguments import NO_ARGUMENTS, Arguments, ConfError
from extender.engine.interface import PluginBuilder, PluginLoader

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


@dataclass(frozen=True, slots=True)
class PluginOption:
    """One plugin entry of a tier: its flags, its arguments as written, and its builder (arguments parsed)."""

    name: str
    build: PluginBuilder
    arguments: Arguments = field(default_factory=dict)
    flags: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, flag: str) -> bool:
        return self.flags.get(flag, True)


@dataclass(frozen=True, slots=True)
class Tier:
    plugins: tuple[PluginOption, ...]


# An action's `configurations` arguments → its frozen value; `warn` takes a line for `SchedulerConf.warnings`.
ActionArguments = Callable[[Arguments, Callable[[str], None]], object]


@dataclass(frozen=True, slots=True)
class SchedulerConf:
    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    # What was left out (unknown action or plugin names) or replaced by a default, one line each, for the loader
    # to report once.
    warnings: tuple[str, ...] = ()
    # The parsed `configurations` arguments of the actions that read theirs, by action name.
    configurations: Mapping[str, object] = field(default_factory=dict)

    def plugin_names(self) -> list[str]:
        return [p.name for t in self.tiers for p in t.plugins]


@dataclass(frozen=True, slots=True)
class Registry:
    """What a conf may name: the plugin loaders and action names registered by the engine."""

    plugins: Mapping[str, PluginLoader]
    actions: Collection[str]
    action_arguments: Mapping[str, ActionArguments] = field(default_factory=dict)


def _bool(value: object, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfError(f"{where}: expected true or false, got {value!r}")


def _plugin(raw: object, where: str, registry: Registry, warnings: list[str]) -> PluginOption | None:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ConfError(f"{where}: a plugin needs a `name`")
    name: str = raw["name"]
    flags: dict[str, bool] = {}
    arguments: Arguments = NO_ARGUMENTS
    for key, value in raw.items():
        if key == "name":
            continue
        if key == "arguments":
            if value is None:
                continue
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise ConfError(f"{where} ({name}): `arguments` must be a mapping")
            arguments = dict(value)
        elif key in FLAGS:
            flags[key] = _bool(value, f"{where} ({name}).{key}")
        else:
            raise ConfError(f"{where} ({name}): unknown field {key!r}")
    loader = registry.plugins.get(name)
    if loader is None:
        known = ", ".join(sorted(registry.plugins))
        warnings.append(f"{where}: unknown plugin {name!r} left out (known: {known})")
        return None
    try:
        build = loader(arguments)
    except ConfError as exc:
        raise ConfError(f"plugin {name}: {exc}") from exc
    return PluginOption(name=name, build=build, arguments=arguments, flags=flags)


def _actions(raw: object, registry: Registry, warnings: list[str]) -> tuple[str, ...]:
    if not isinstance(raw, str):
        raise ConfError("actions: expected a comma-separated string such as \"enqueue, allocate, backfill\"")
    actions = []
    for action in (a.strip() for a in raw.split(",")):
        if not action:
            continue
        if action in registry.actions:
            actions.append(action)
        else:
            known = ", ".join(sorted(registry.actions))
            warnings.append(f"actions: unknown action {action!r} left out (known: {known})")
    return tuple(actions)


def _tiers(raw: object, registry: Registry, warnings: list[str]) -> tuple[Tier, ...]:
    if not isinstance(raw, list):
        raise ConfError("tiers: expected a list of {plugins: [...]}")
    tiers: list[Tier] = []
    for ti, tier in enumerate(raw):
        plugins_raw = tier.get("plugins") if isinstance(tier, Mapping) else None
        if not isinstance(plugins_raw, list):
            raise ConfError(f"tiers[{ti}]: expected `plugins: [...]`")
        options = (_plugin(p, f"tiers[{ti}].plugins[{pi}]", registry, warnings) for pi, p in enumerate(plugins_raw))
        plugins = tuple(p for p in options if p is not None)
        names = {p.name for p in plugins}
        if "proportion" in names and any(p.name == "drf" and p.flags.get("enableHierarchy") for p in plugins):
            raise ConfError(f"tiers[{ti}]: drf with enableHierarchy and proportion cannot be in the same tier")
        tiers.append(Tier(plugins=plugins))
    return tuple(tiers)


def _configurations(raw: object, registry: Registry, warnings: list[str]) -> dict[str, object]:
    """The arguments of the actions that read theirs, parsed; every action that does gets a value (its defaults
    when the conf has no entry for it)."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ConfError("configurations: expected a list of {name: <action>, arguments: {...}}")
    given: dict[str, Arguments] = {}
    for i, entry in enumerate(raw):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str):
            raise ConfError(f"configurations[{i}]: an entry needs a `name` (the action it configures)")
        arguments = entry.get("arguments")
        if arguments is not None and (not isinstance(arguments, Mapping) or not all(isinstance(k, str)
                                                                                   for k in arguments)):
            raise ConfError(f"configurations[{i}] ({name}): `arguments` must be a mapping")
        given.setdefault(name, dict(arguments or {}))  # Volcano reads the first entry of a name
    parsed: dict[str, object] = {}
    for name, parse in sorted(registry.action_arguments.items()):
        try:
            parsed[name] = parse(given.get(name, NO_ARGUMENTS), partial(_warn, warnings, name))
        except ConfError as exc:
            raise ConfError(f"configurations ({name}): {exc}") from exc
    return parsed


def _warn(warnings: list[str], action: str, line: str) -> None:
    warnings.append(f"configurations ({action}): {line}")


def parse_conf(raw: object, registry: Registry) -> SchedulerConf:
    """Validate a decoded configuration document against the registered plugins and actions."""
    if not isinstance(raw, Mapping):
        raise ConfError("configuration: expected a mapping with `actions` and `tiers`")
    warnings: list[str] = []
    actions = _actions(raw.get("actions", ""), registry, warnings)
    tiers = _tiers(raw.get("tiers") or [], registry, warnings)
    configurations = _configurations(raw.get("configurations"), registry, warnings)
    return SchedulerConf(actions=actions, tiers=tiers, warnings=tuple(warnings), configurations=configurations)


def load_conf(text: str | None, registry: Registry) -> SchedulerConf:
    """Parse YAML text; None means Volcano's default configuration, and an empty document is refused (a conf file
    that lost its contents must not silently become the default)."""
    if text is None:
        text = DEFAULT_CONF
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"configuration is not valid YAML: {' '.join(str(exc).split())}") from exc
    if raw is None:
        raise ConfError("configuration is empty: give `actions` and `tiers` (without a conf, Volcano's default runs)")
    return parse_conf(raw, registry)
