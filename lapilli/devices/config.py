"""The vGPU device configuration: ConfigMap `volcano-vgpu-device-config` (`kube-system`), key `device-config.yaml`.

Counterpart: Volcano's `pkg/scheduler/api/devices/config` (`NvidiaConfig`, `GetDefaultDevicesConfig`,
`InitDevicesConfig`) and the same ConfigMap as the HAMi vGPU device plugin reads it. What the scheduler uses: the
four resource names (renamable: `resourceCountName`, `resourceMemoryName`, `resourceCoreName`,
`resourceMemoryPercentageName`), `gpuMemoryFactor` (MIG slice sizes are compared in its units) and
`knownMigGeometries` (per card model, the groups of MIG slices a card may be cut into). The other keys are read
and kept (split count and scaling are the device plugin's; the defaults are its webhook's).

Differences from Volcano, on purpose: a key the ConfigMap leaves out keeps its default (Go's YAML decoding leaves it
empty, so a ConfigMap with only `knownMigGeometries` would rename every resource to ""); a ConfigMap that cannot be
read is an error the caller reports (Volcano logs it at V(3) and uses the defaults, as Lapilli's service then does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lapilli.devices.names import (
    CONFIG_KEY,
    VGPU_CORES,
    VGPU_MEMORY,
    VGPU_MEMORY_PERCENTAGE,
    VGPU_NUMBER,
)


class MigTemplate(BaseModel):
    """One kind of MIG slice in a geometry: its name (`1g.10gb`), device memory (MB) and how many the card has."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    memory: int = Field(ge=0)
    count: int = Field(ge=0)


class Geometry(BaseModel):
    """A way to cut a card: a named group of slices (`group2`: 3 × 2g.20gb + 1 × 1g.10gb)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    group: str = ""
    instances: tuple[MigTemplate, ...] = Field(default=(), alias="geometries")


class MigModels(BaseModel):
    """The geometries allowed for cards whose type contains one of `models`."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    models: tuple[str, ...] = ()
    geometries: tuple[Geometry, ...] = Field(default=(), alias="allowedGeometries")


class NvidiaConfig(BaseModel):
    """The `nvidia:` section, every key with Volcano's default (`GetDefaultDevicesConfig`)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    count_name: str = Field(default=VGPU_NUMBER, alias="resourceCountName", min_length=1)
    memory_name: str = Field(default=VGPU_MEMORY, alias="resourceMemoryName", min_length=1)
    core_name: str = Field(default=VGPU_CORES, alias="resourceCoreName", min_length=1)
    percentage_name: str = Field(default=VGPU_MEMORY_PERCENTAGE, alias="resourceMemoryPercentageName")
    default_memory: int = Field(default=0, alias="defaultMemory", ge=0)
    default_cores: int = Field(default=0, alias="defaultCores", ge=0)
    default_gpu_num: int = Field(default=1, alias="defaultGPUNum", ge=0)
    split_count: int = Field(default=10, alias="deviceSplitCount", ge=0)
    memory_scaling: float = Field(default=1.0, alias="deviceMemoryScaling", gt=0)
    core_scaling: float = Field(default=1.0, alias="deviceCoreScaling", gt=0)
    disable_core_limit: bool = Field(default=False, alias="disableCoreLimit")
    overwrite_env: bool = Field(default=False, alias="overwriteEnv")
    gpu_memory_factor: int = Field(default=1, alias="gpuMemoryFactor", ge=0)
    mig_geometries: tuple[MigModels, ...] = Field(default=(), alias="knownMigGeometries")

    def geometries_for(self, card_type: str) -> tuple[Geometry, ...] | None:
        """The MIG geometries of a card type: those of the first entry naming a model the type contains
        (Volcano's `extractGeometryFromType`); None when no entry does (such a card falls back to hami-core)."""
        for entry in self.mig_geometries:
            if any(model in card_type for model in entry.models):
                return entry.geometries
        return None

    def resource_names(self) -> tuple[str, ...]:
        """The extended resources whose asks are card asks (the percentage name only when it is set)."""
        names = (self.count_name, self.memory_name, self.core_name, self.percentage_name)
        return tuple(n for n in names if n)


class DeviceConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    nvidia: NvidiaConfig = NvidiaConfig()


DEFAULT_CONFIG = DeviceConfig()


def _one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    return f"{where}: {first['msg']}"


def parse_device_config(text: str) -> DeviceConfig:
    """The config from the YAML of `device-config.yaml`; ValueError (one line) when it cannot be used."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{CONFIG_KEY} is not YAML: {' '.join(str(exc).split())}") from exc
    if raw is None:
        return DEFAULT_CONFIG
    if not isinstance(raw, Mapping):
        raise ValueError(f"{CONFIG_KEY}: expected a mapping, got {type(raw).__name__}")
    try:
        return DeviceConfig.model_validate({"nvidia": raw.get("nvidia") or {}})
    except ValidationError as exc:
        raise ValueError(f"{CONFIG_KEY}: {_one_line(exc)}") from exc


def config_from_configmap(data: Mapping[str, Any] | None) -> DeviceConfig:
    """The config a ConfigMap's `data` holds (ValueError when the key is missing or cannot be read)."""
    text = (data or {}).get(CONFIG_KEY)
    if not isinstance(text, str):
        raise ValueError(f"has no {CONFIG_KEY} key")
    return parse_device_config(text)


__all__ = [
    "DEFAULT_CONFIG",
    "DeviceConfig",
    "Geometry",
    "MigModels",
    "MigTemplate",
    "NvidiaConfig",
    "config_from_configmap",
    "parse_device_config",
]
