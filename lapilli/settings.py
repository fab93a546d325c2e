"""Settings as grouped, frozen dataclasses with one docstring per field (kopf's pattern), and the command-line
flags derived from them, so a flag is declared once: as the field it sets.

A field declared `port: int = flag("--webhook-port", 8443)` followed by its docstring is a flag: the command
line builds its option from the field (name from the declaration, type from the annotation, default from the
field, help from the docstring) and `from_flags` builds the settings back from the parsed values. A field whose
type is itself a settings dataclass is a group and is walked; any other field keeps its default on the command
line. Several fields may declare the same flag (one value that two components read, as `--scheduler-name`);
they must agree on type and default. This module knows no CLI library: the assembly turns `flag_fields` into
click options.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, TypeVar, get_type_hints

__all__ = ["Flag", "FlagField", "flag", "flag_fields", "from_flags"]

_FLAG: Final = "lapilli.settings.flag"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Flag:
    """A command-line flag: `--name`, or `--on/--off` for a switch."""

    decl: str

    @property
    def name(self) -> str:
        """The flag as typed (the `--on` half of a switch)."""
        return self.decl.split("/")[0]

    @property
    def key(self) -> str:
        """The identifier its parsed value is found under."""
        return self.name.lstrip("-").replace("-", "_")


@dataclass(frozen=True, slots=True)
class FlagField:
    """One settings field that is a flag, with what a CLI needs to offer it."""

    flag: Flag
    path: tuple[str, ...]
    """Field names from the root settings class down to this field."""
    type: Any
    """The field's resolved annotation (`int`, `Path | None`, `tuple[str, ...]`...)."""
    default: object
    doc: str
    """The field's docstring on one line (the flag's help)."""


def flag(decl: str, default: T) -> T:
    """A settings field set by the command-line flag `decl` (`"--name"` or `"--on/--off"`)."""
    return dataclasses.field(default=default, metadata={_FLAG: Flag(decl)})


def flag_fields(cls: type) -> list[FlagField]:
    """Every flag of `cls` and its groups, in declaration order; a flag shared by several fields comes once per
    field (`ValueError` if they disagree on type or default: a bug in the declarations)."""
    out = list(_walk(cls, ()))
    first: dict[str, FlagField] = {}
    for f in out:
        seen = first.setdefault(f.flag.key, f)
        if (seen.type, seen.default, seen.flag.decl) != (f.type, f.default, f.flag.decl):
            raise ValueError(f"{f.flag.name} is declared differently by {'.'.join(seen.path)} and {'.'.join(f.path)}")
    return out


def from_flags(cls: type[T], values: Mapping[str, object]) -> T:
    """Build `cls` (and its groups) from parsed flag values keyed by `Flag.key`; a flag absent from `values`
    leaves its field's default."""
    hints = get_type_hints(cls)
    kwargs: dict[str, object] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        flag_ = f.metadata.get(_FLAG)
        if flag_ is not None:
            if flag_.key in values:
                kwargs[f.name] = values[flag_.key]
        elif _is_group(hints[f.name]):
            kwargs[f.name] = from_flags(hints[f.name], values)
    return cls(**kwargs)


def _walk(cls: type, path: tuple[str, ...]) -> Iterator[FlagField]:
    hints, docs = _hints(cls), _docs(cls)
    for f in dataclasses.fields(cls):
        flag_ = f.metadata.get(_FLAG)
        if flag_ is not None:
            yield FlagField(flag_, (*path, f.name), hints[f.name], f.default, docs.get(f.name, ""))
        elif _is_group(hints[f.name]):
            yield from _walk(hints[f.name], (*path, f.name))


def _is_group(tp: object) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


@cache
def _docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string literal right below a field) from the class source, as pydantic's
    `use_attribute_docstrings` reads them; empty when the source is not available."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for stmt, after in itertools.pairwise(body):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs
