"""lapilli.settings: a settings field declared with `flag` is the flag (name, type, default, docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from lapilli.settings import flag, flag_fields, from_flags


@dataclass(frozen=True, slots=True)
class _Inner:
    names: tuple[str, ...] = flag("--name", ("x",))
    """Names (repeatable)."""
    quiet: bool = flag("--quiet/--loud", False)
    not_a_flag: float = 3.0


@dataclass(frozen=True, slots=True)
class _Outer:
    port: int = flag("--port", 80)
    """Port to listen on,
    on two lines."""
    inner: _Inner = field(default_factory=_Inner)
    names: tuple[str, ...] = flag("--name", ("x",))
    """The same flag, read by a second group."""


@dataclass(frozen=True, slots=True)
class _Clash:
    a: int = flag("--n", 1)
    b: int = flag("--n", 2)


def test_fields_walk_groups_in_order_with_their_docstrings():
    fields = flag_fields(_Outer)
    assert [(f.path, f.flag.name, f.flag.key) for f in fields] == [
        (("port",), "--port", "port"),
        (("inner", "names"), "--name", "name"),
        (("inner", "quiet"), "--quiet", "quiet"),
        (("names",), "--name", "name"),
    ]
    assert fields[0].doc == "Port to listen on, on two lines."
    assert fields[0].type is int and fields[0].default == 80
    assert fields[2].doc == ""  # no docstring below the field


def test_from_flags_fills_every_field_of_a_flag_and_keeps_other_defaults():
    built = from_flags(_Outer, {"name": ("a", "b"), "quiet": True})
    assert built == _Outer(port=80, inner=_Inner(names=("a", "b"), quiet=True), names=("a", "b"))
    assert built.inner.not_a_flag == 3.0
    assert from_flags(_Outer, {}) == _Outer()


def test_one_flag_declared_two_ways_is_refused():
    with pytest.raises(ValueError, match="--n is declared differently by a and b"):
        flag_fields(_Clash)
