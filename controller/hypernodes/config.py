"""The HyperNode discovery configuration, read from Volcano's controller ConfigMap as Volcano reads it.

Counterparts: `pkg/controllers/hypernode/config/loader.go` (key `volcano-controller.conf` of the ConfigMap, YAML
into `NetworkTopologyConfig`), `api/types.go` (`GetDiscoveryConfig`: the first entry of the source that is enabled)
and `discovery/label/label.go` (`parseCfg`, `checkLabels`). The `label` source's
`config.networkTopologyTypes` maps a type name (at most 20 characters) to node label keys, highest tier first,
the last one being the node level (`kubernetes.io/hostname`) and dropped; a type whose labels repeat is skipped.
What does not read is returned as a problem next to the result, never raised: a broken ConfigMap turns discovery
off with a warning, as a failed load leaves Volcano with an empty configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from lapilli.times import parse_duration

CONFIG_KEY: Final = "volcano-controller.conf"
CONFIGMAP_NAME: Final = "volcano-controller-configmap"
"""The name Volcano gives the ConfigMap (`<helm release>-controller-configmap`); the install and `lapilli dev up`
point discovery at one of this name in Lapilli's namespace."""
LABEL_SOURCE: Final = "label"
TYPE_NAME_MAX: Final = 20


@dataclass(frozen=True, slots=True)
class LabelDiscovery:
    """The `label` source, enabled: each topology type's label keys from tier 1 (just above the nodes) up."""

    types: tuple[tuple[str, tuple[str, ...]], ...]

    def keys(self) -> frozenset[str]:
        """Every label key some tier of some type reads (what a node change must touch to matter)."""
        return frozenset(key for _, keys in self.types for key in keys)


def _lookup(raw: Mapping[Any, Any], key: str) -> Any:
    """A field as mapstructure finds it: the exact key, else one that differs only in case."""
    if key in raw:
        return raw[key]
    return next((value for k, value in raw.items() if str(k).lower() == key.lower()), None)


def _entry(raw: object, index: int) -> tuple[Mapping[Any, Any] | None, str]:
    """One `networkTopologyDiscovery[]` item, checked as yaml.v2 decodes it into `DiscoveryConfig`."""
    where = f"networkTopologyDiscovery[{index}]"
    if not isinstance(raw, Mapping):
        return None, f"{where}: expected an object"
    if not isinstance(raw.get("source", ""), str):
        return None, f"{where}.source: expected a string"
    if not isinstance(raw.get("enabled", False), bool):
        return None, f"{where}.enabled: expected true or false, got {raw.get('enabled')!r}"
    interval = raw.get("interval")
    if isinstance(interval, str):
        try:
            parse_duration(interval)
        except ValueError as exc:
            return None, f"{where}.interval: {exc}"
    elif interval is not None and (isinstance(interval, bool) or not isinstance(interval, int)):
        return None, f"{where}.interval: expected a duration, got {interval!r}"
    if raw.get("config") is not None and not isinstance(raw.get("config"), Mapping):
        return None, f"{where}.config: expected an object"
    return raw, ""


def _types(config: Mapping[Any, Any]) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], list[str]]:
    """`parseCfg`: the usable types, sorted by name, and why the others were skipped."""
    raw = _lookup(config, "networkTopologyTypes")
    if raw is None:
        return (), []
    if not isinstance(raw, Mapping):
        return (), ["config.networkTopologyTypes: expected a map of type name to node labels"]
    found: list[tuple[str, tuple[str, ...]]] = []
    problems: list[str] = []
    for name, entries in sorted(raw.items(), key=lambda item: str(item[0])):
        name, where = str(name), f"config.networkTopologyTypes.{name}"
        if len(name) > TYPE_NAME_MAX:
            problems.append(f"{where}: a type name has at most {TYPE_NAME_MAX} characters; skipped")
            continue
        labels = [_lookup(e, "nodeLabel") if isinstance(e, Mapping) else None
                  for e in (entries if isinstance(entries, list) else [None])]
        if any(isinstance(label, bool) or not isinstance(label, str | int | float) for label in labels):
            problems.append(f"{where}: expected a list of {{nodeLabel: KEY}}; skipped")
            continue
        keys = [str(label) for label in labels]
        if len(set(keys)) != len(keys):
            problems.append(f"{where}: there are duplicate labels; skipped")
            continue
        found.append((name, tuple(reversed(keys[:-1]))))  # the last one names the node itself
    return tuple(found), problems


def read_config(text: str | None) -> tuple[LabelDiscovery | None, list[str]]:
    """The enabled `label` discovery of the ConfigMap's `volcano-controller.conf` (None: discovery off), and the
    problems found reading it."""
    if text is None:
        return None, [f"the ConfigMap has no key {CONFIG_KEY}"]
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return None, [f"{CONFIG_KEY} is not YAML: {exc}".replace("\n", " ")]
    if doc is None:
        return None, []
    if not isinstance(doc, Mapping):
        return None, [f"{CONFIG_KEY}: expected an object"]
    entries = doc.get("networkTopologyDiscovery")
    if entries is None:
        return None, []
    if not isinstance(entries, list):
        return None, ["networkTopologyDiscovery: expected a list"]
    checked = [_entry(raw, i) for i, raw in enumerate(entries)]
    if problems := [problem for _, problem in checked if problem]:
        return None, problems  # yaml.v2 fails the whole document: Volcano then runs no discovery at all
    label = next((e for e, _ in checked if e is not None and e.get("source") == LABEL_SOURCE and e.get("enabled")),
                 None)
    if label is None:
        return None, []
    types, problems = _types(label.get("config") or {})
    return LabelDiscovery(types), problems
