"""The registry of actions (Volcano's `framework/interface.go` Action and `framework.RegisterAction`).

An action is registered by name and runs over the whole session, Statements included, so this registry sits
above the session, beside the actions; plugins register in `extender/engine/registry.py`, below it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from extender.engine.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


ACTIONS: dict[str, Callable[[], Action]] = {}


def register_action(name: str) -> Callable[[Callable[[], Action]], Callable[[], Action]]:
    def deco(factory: Callable[[], Action]) -> Callable[[], Action]:
        ACTIONS[name] = factory
        return factory

    return deco
