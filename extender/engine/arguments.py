"""Reading a plugin's `arguments` into typed values, once, when the scheduler conf is loaded.

Volcano reads plugin arguments inside every session (`framework.Arguments.GetFloat64` and friends, which log and
keep the default on a bad value); scheduler-plugins validates a plugin's args when the plugin is built. Lapilli does
the latter at load time: every plugin registers a parser that turns its raw `arguments` mapping into a frozen value,
and a value that cannot be read is a `ConfError` naming the argument and the value, so a bad conf is refused before
any session runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeVar, cast

# A plugin's `arguments` exactly as decoded from YAML.
Arguments = Mapping[str, object]

NO_ARGUMENTS: Final[Arguments] = {}


class ConfError(ValueError):
    """A scheduler configuration that cannot be used as written; `str()` is one readable line."""


def shown(value: object) -> str:
    """The value as the user wrote it: strings in double quotes, everything else as YAML would print it."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


T = TypeVar("T", int, float)


def number(arguments: Arguments, key: str, default: float) -> float:
    """A float argument (YAML numbers, or strings holding one, as Volcano's `GetFloat64` accepts)."""
    return _parsed(arguments, key, default, float, (int, float, str), "a number")


def integer(arguments: Arguments, key: str, default: int) -> int:
    """An integer argument (YAML integers, or strings holding one, as Volcano's `GetInt` accepts)."""
    return _parsed(arguments, key, default, int, (int, str), "an integer")


def _parsed(arguments: Arguments, key: str, default: T, convert: Callable[[str | int | float], T],
               accepted: tuple[type, ...], what: str) -> T:
    value = arguments.get(key)
    if value is None:
        return default
    # bool is an int to Python, never a number to Volcano's readers.
    if isinstance(value, bool) or not isinstance(value, accepted):
        raise ConfError(f"argument {key}: {shown(value)} is not {what}")
    try:
        return convert(cast("str | int | float", value))  # one of `accepted`, checked above
    except ValueError as exc:
        raise ConfError(f"argument {key}: {shown(value)} is not {what}") from exc


def boolean(arguments: Arguments, key: str, default: bool) -> bool:
    """A boolean argument (YAML booleans, or the strings true/false in any case, as Volcano's `GetBool`)."""
    value = arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfError(f"argument {key}: {shown(value)} is not true or false")


def text(arguments: Arguments, key: str, default: str) -> str:
    """A string argument."""
    value = arguments.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConfError(f"argument {key}: {shown(value)} is not a string")
    return value
