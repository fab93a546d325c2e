"""The registry of actions (Volcano's `framework/interface.go` Action and `framework.RegisterAction`).

An action is registered by name and runs over the whole session, Statements included, so this registry sits
above the session, beside the actions; plugins register in `extender/engine/registry.py`, below it. An action that
reads the conf's `configurations` entry of its name registers a parser for its `arguments`, which the conf loader
runs (`conf.Registry.action_arguments`): a bad value is refused when the conf is loaded, not met in a session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from extender.engine.conf import ActionArguments
from extender.engine.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


ACTIONS: dict[str, Callable[[], Action]] = {}
# Parsers of the `configurations` arguments of the actions that read theirs (raising ConfError; a value Volcano
# replaces by its default is reported through `warn`).
ACTION_ARGUMENTS: dict[str, ActionArguments] = {}


def register_action(
    name: str, arguments: ActionArguments | None = None
) -> Callable[[Callable[[], Action]], Callable[[], Action]]:
    def deco(factory: Callable[[], Action]) -> Callable[[], Action]:
        ACTIONS[name] = factory
        if arguments is not None:
            ACTION_ARGUMENTS[name] = arguments
        return factory

    return deco
