"""Reading an admitted object defensively: typed field access that reports the path of a malformed field.

The apiserver runs mutating webhooks *before* it checks a custom resource against its schema, so a mutator can
see `replicas: "three"`. Volcano's webhook fails to decode such an object and denies it with the decode error;
these helpers do the same, with a message naming the field (`spec.tasks[0].replicas: expected an integer, got
"three"`). Integers are int32 as in Volcano's Go types.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ValidationError

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1

_TYPE_NAMES: Final = {str: "a string", bool: "a boolean", int: "an integer", float: "a number", list: "a list"}


class DecodeError(ValueError):
    """A field of the wrong type or out of range."""

    def __init__(self, path: str, expected: str, value: object) -> None:
        shown = f'"{value}"' if isinstance(value, str) else _describe(value)
        super().__init__(f"{path}: expected {expected}, got {shown}")


# pydantic's error types as the Go type a JSON decoder expected there.
_EXPECTED: Final = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "greater_than_equal": "a 32-bit integer", "less_than_equal": "a 32-bit integer",
    "string_type": "a string", "enum": "a string", "bool_type": "a boolean", "bool_parsing": "a boolean",
    "list_type": "a list", "dict_type": "an object", "model_type": "an object", "model_attributes_type": "an object",
}


def _inner(annotation: Any) -> Any:
    """The type under Annotated and Optional."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _path(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the field path Go would name (`spec.tasks[0].replicas`, `spec.plugins[ssh]`)."""
    out, current = "", _inner(model)
    for part in loc:
        if isinstance(current, type) and issubclass(current, BaseModel):
            out += f".{part}" if out else str(part)
            field = next((f for n, f in current.model_fields.items() if part in (f.alias, n)), None)
            current = _inner(field.annotation) if field is not None else None
            continue
        out += f"[{part}]"
        args = typing.get_args(current)
        current = _inner(args[-1]) if args else None
    return out


def from_validation_error(model: type[BaseModel], error: ValidationError) -> DecodeError:
    """The first error of a shape-only validation of `model`, as a DecodeError."""
    first = error.errors(include_url=False)[0]
    expected = _EXPECTED.get(first["type"], first["msg"].removeprefix("Value error, "))
    return DecodeError(_path(model, tuple(first["loc"])), expected, first.get("input"))


def _describe(value: object) -> str:
    if isinstance(value, Mapping):
        return "an object"
    for cls, name in _TYPE_NAMES.items():
        if type(value) is cls:
            return f"{name} {value!r}" if cls in (int, float, bool) else name
    return type(value).__name__


def mapping(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    """A nested object; absent or null reads as empty."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DecodeError(f"{path}.{key}" if path else key, "an object", value)
    return value


def items(parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{path}.{key}" if path else key, "a list", value)
    return value


def string(parent: Mapping[str, Any], key: str, path: str) -> str:
    value = parent.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DecodeError(f"{path}.{key}" if path else key, "a string", value)
    return value


def integer(parent: Mapping[str, Any], key: str, path: str) -> int | None:
    """An int32 field; None when absent or null (Go's nil pointer)."""
    value = parent.get(key)
    if value is None:
        return None
    where = f"{path}.{key}" if path else key
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(where, "an integer", value)
    if not INT32_MIN <= value <= INT32_MAX:
        raise DecodeError(where, "a 32-bit integer", value)
    return value


def boolean(parent: Mapping[str, Any], key: str, path: str) -> bool | None:
    value = parent.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise DecodeError(f"{path}.{key}" if path else key, "a boolean", value)
    return value


def element(value: object, path: str) -> Mapping[str, Any]:
    """A list element that must be an object."""
    if not isinstance(value, Mapping):
        raise DecodeError(path, "an object", value)
    return value


def string_map(parent: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    """Labels/annotations: a map of strings."""
    raw = mapping(parent, key, path)
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise DecodeError(f"{path}.{key}[{k}]" if path else f"{key}[{k}]", "a string", v)
        out[str(k)] = v
    return out
