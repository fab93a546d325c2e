"""Queue resource lists (`capability`, `deserved`, `guarantee.resource`) as exact quantities, and their text.

Upstream `ValidateResourceQuantityValue` rules apply to every quantity: it must parse, be ≥ 0, and be whole for
integer resources (`pods`, object counts, and extended resources such as `nvidia.com/gpu`).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Final

from lapilli.resources import QuantityError, format_quantity, parse_quantity
from webhook.names import qualified_name

Resources = dict[str, Fraction]

QUANTITY_FORMAT: Final = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_INTEGER_RESOURCES: Final = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)


def raw_list(spec: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    """`capability`, `deserved` or `guarantee` (meaning `guarantee.resource`) as written."""
    if field == "guarantee":
        guarantee = spec.get("guarantee")
        value = guarantee.get("resource") if isinstance(guarantee, Mapping) else None
    else:
        value = spec.get(field)
    return value if isinstance(value, Mapping) else {}


def parsed(spec: Mapping[str, Any], field: str) -> Resources:
    """The list with unparseable entries left out (they are reported by `quantity_errors`)."""
    out: Resources = {}
    for name, value in raw_list(spec, field).items():
        try:
            out[str(name)] = parse_quantity(value)
        except QuantityError:
            continue
    return out


def is_integer_resource(name: str) -> bool:
    """`helper.IsIntegerResourceName`: object counts and extended (non-native, domain-prefixed) resources."""
    if name in _INTEGER_RESOURCES:
        return True
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith("requests.") and not qualified_name(f"requests.{name}")


def quantity_errors(value: object, name: str, path: str) -> list[str]:
    try:
        quantity = parse_quantity(value)  # type: ignore[arg-type]
    except QuantityError:
        return [f'{path}: Invalid value: "{value}": {QUANTITY_FORMAT}']
    errors = []
    if quantity < 0:
        errors.append(f'{path}: Invalid value: "{value}": must be greater than or equal to 0')
    if is_integer_resource(name) and quantity.denominator != 1:
        errors.append(f'{path}: Invalid value: "{value}": must be an integer')
    return errors


def show(name: str, value: Fraction) -> str:
    """A quantity for messages: cpu in cores/millicores, memory with binary suffixes."""
    return format_quantity(value, binary=name in ("memory", "ephemeral-storage"))


def show_list(resources: Resources) -> str:
    """`cpu 3, memory 4Gi, nvidia.com/gpu 2`: Volcano's `Resource.String()` order, Kubernetes quantity text."""
    names = ["cpu", "memory", *sorted(n for n in resources if n not in ("cpu", "memory"))]
    return ", ".join(f"{n} {show(n, resources.get(n, Fraction(0)))}" for n in names)


def add(into: Resources, other: Resources) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Fraction(0)) + value
