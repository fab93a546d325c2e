"""Go `flag` package semantics for job-plugin arguments (`spec.plugins[name]` is a list of CLI-style strings).

Mirrors how every Volcano job plugin parses its arguments: a `flag.FlagSet` with `ContinueOnError`, so a bad
argument stops parsing, is logged, and every flag not yet seen keeps its default. Accepted forms: `-name`,
`--name`, `-name=value`, `--name=value`, `-name value` (not for booleans); parsing stops at the first non-flag
argument or at `--`. One leniency beyond Go: a single list item such as `"--port 1234"` (flag, whitespace,
value, no `=`) is read as two items, because manifests written by hand often do that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

FlagValue = str | int | bool

_SPLIT: Final = re.compile(r"^(-{1,2}[^=\s]+)\s+(\S.*)$", re.DOTALL)
_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE: Final = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True, slots=True)
class ParsedFlags:
    """Flag values (defaults where not given) and the first parse error, worded like Go's, or ""."""

    values: Mapping[str, FlagValue]
    error: str = ""

    def text(self, name: str) -> str:
        value = self.values[name]
        return value if isinstance(value, str) else str(value)

    def number(self, name: str) -> int:
        value = self.values[name]
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    def switch(self, name: str) -> bool:
        return bool(self.values[name])


def _parse_bool(text: str) -> bool | None:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def _parse_int(text: str) -> int | None:
    """`strconv.ParseInt(s, 0, 64)`: decimal, 0x/0o/0b prefixes, a leading 0 for octal, `_` separators."""
    sign = text[:1] if text[:1] in ("+", "-") else ""
    body = text[len(sign) :]
    if len(body) > 1 and body[0] == "0" and body[1] not in "xXoObB":
        body = "0o" + body[1:]  # Go reads a leading 0 as octal; Python wants 0o
    try:
        value = int(sign + body, 0)
    except ValueError:
        return None
    return value if -(2**63) <= value < 2**63 else None


def _convert(name: str, default: FlagValue, text: str) -> tuple[FlagValue | None, str]:
    if isinstance(default, bool):
        parsed_bool = _parse_bool(text)
        if parsed_bool is None:
            return None, f'invalid boolean value "{text}" for -{name}: parse error'
        return parsed_bool, ""
    if isinstance(default, int):
        parsed_int = _parse_int(text)
        if parsed_int is None:
            return None, f'invalid value "{text}" for flag -{name}: parse error'
        return parsed_int, ""
    return text, ""


def _expand(args: Sequence[object]) -> list[str]:
    out: list[str] = []
    for arg in args:
        text = str(arg)
        match = _SPLIT.match(text)
        if match:
            out.extend((match[1], match[2].strip()))
        else:
            out.append(text)
    return out


def parse_flags(args: Sequence[object] | None, defaults: Mapping[str, FlagValue]) -> ParsedFlags:
    """Parse `args` against `defaults` (flag name -> default; the default's type is the flag's type)."""
    values: dict[str, FlagValue] = dict(defaults)
    items = _expand(args or [])
    i = 0
    while i < len(items):
        arg = items[i]
        i += 1
        if len(arg) < 2 or arg[0] != "-":
            break  # first non-flag argument ends parsing, as in Go
        dashes = 2 if arg[1] == "-" else 1
        if dashes == 2 and len(arg) == 2:
            break  # "--" terminator
        body = arg[dashes:]
        if not body or body[0] in "-=":
            return ParsedFlags(values, f"bad flag syntax: {arg}")
        name, has_value, text = body.partition("=")
        if name not in defaults:
            return ParsedFlags(values, f"flag provided but not defined: -{name}")
        default = defaults[name]
        if not has_value:
            if isinstance(default, bool):
                values[name] = True
                continue
            if i >= len(items):
                return ParsedFlags(values, f"flag needs an argument: -{name}")
            text = items[i]
            i += 1
        value, error = _convert(name, default, text)
        if value is None:
            return ParsedFlags(values, error)
        values[name] = value
    return ParsedFlags(values)
