"""What the service is made of: components started in order, stopped in reverse, ready when all are.

A component is the unit the assembly wires: the cluster caches, the admission webhook today; the extender
(plain HTTP on its own port, leader only) and the controllers are added the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Protocol

log = logging.getLogger("lapilli.serve")


class Component(Protocol):
    @property
    def name(self) -> str: ...

    async def start(self) -> None:
        """Start and return once serving (or once it has done all it can; `ready` tells the rest)."""
        ...

    async def stop(self) -> None:
        """Stop; must be safe to call after a failed or partial start."""
        ...

    def ready(self) -> bool:
        """Whether it can do its job now (drives /readyz)."""
        ...


async def run_components(components: Sequence[Component], stop: asyncio.Event) -> None:
    """Start `components` in order, wait for `stop`, then stop the started ones in reverse order."""
    started: list[Component] = []
    try:
        for component in components:
            log.info("starting %s", component.name)
            await component.start()
            started.append(component)
        log.info("serving: %s", ", ".join(c.name for c in components))
        await stop.wait()
    finally:
        for component in reversed(started):
            log.info("stopping %s", component.name)
            with contextlib.suppress(Exception):
                await component.stop()
