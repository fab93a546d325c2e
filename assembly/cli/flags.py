"""click options derived from a settings class (`lapilli.settings`): one option per flag field, typed by the
field's annotation, defaulting to its default, documented by its docstring."""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

import click

from lapilli.settings import FlagField, flag_fields

F = TypeVar("F", bound=Callable[..., Any])


def settings_options(cls: type) -> Callable[[F], F]:
    """Decorate a click command with an option for every flag of `cls`, in declaration order; the command
    receives them as keyword arguments named by `Flag.key` (build the settings with `lapilli.settings.from_flags`)."""
    options: dict[str, FlagField] = {}
    for f in flag_fields(cls):
        options.setdefault(f.flag.key, f)  # a flag read by two groups is offered once

    def decorate(command: F) -> F:
        for f in reversed(options.values()):  # click stacks decorators bottom-up
            command = click.option(f.flag.decl, f.flag.key, **_option_kwargs(f))(command)
        return command

    return decorate


def _option_kwargs(f: FlagField) -> dict[str, Any]:
    tp: Any = f.type
    kwargs: dict[str, Any] = {"help": f.doc, "default": f.default, "show_default": f.default is not None}
    if get_origin(tp) in (Union, types.UnionType):  # `X | None`: optional, default None
        tp = next(a for a in get_args(tp) if a is not type(None))
    if get_origin(tp) is tuple:
        kwargs["multiple"] = True
        tp = get_args(tp)[0]
    if tp is bool:
        if "/" not in f.flag.decl:
            kwargs["is_flag"] = True
            kwargs["show_default"] = False
        return kwargs
    kwargs["type"] = click.Path(path_type=Path) if tp is Path else tp
    return kwargs
