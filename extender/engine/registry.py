"""The registry of plugins (Volcano's `framework/plugins.go`): the one list of plugins a conf may name.

A plugin registers an argument parser and a builder: the parser runs when a conf is loaded (`conf.py`), the
builder once per session with the frozen value the parser returned. It sits below the session: a plugin module
imports this and `interface` (the `SessionView` it is built against), never the concrete Session (an import-linter
contract). Actions have their own registry, `actions/registry.py`, as they run over the whole Session.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

from extender.engine.arguments import Arguments
from extender.engine.interface import Plugin, PluginBuilder, PluginLoader

PLUGINS: dict[str, PluginLoader] = {}

A = TypeVar("A")


def _load(parse: Callable[[Arguments], A], build: Callable[[A], Plugin], arguments: Arguments) -> PluginBuilder:
    # partials of module-level callables, so a loaded conf pickles (it crosses the session process pipe).
    return partial(build, parse(arguments))


def _load_plain(build: Callable[[], Plugin], arguments: Arguments) -> PluginBuilder:
    return build


def register_plugin(name: str, parse: Callable[[Arguments], A], build: Callable[[A], Plugin]) -> None:
    """Offer plugin `name`: `parse` validates its conf `arguments` (raising `ConfError`) into a frozen value,
    `build` makes a fresh plugin from that value for each session."""
    PLUGINS[name] = partial(_load, parse, build)


def register_plain_plugin(name: str, build: Callable[[], Plugin]) -> None:
    """Offer plugin `name` that takes no arguments (what it is given is ignored, as by Volcano's plugins)."""
    PLUGINS[name] = partial(_load_plain, build)
