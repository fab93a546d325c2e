"""Plugin and action interfaces, and the registry of both (Volcano's `framework/interface.go`, `plugins.go`).

A plugin is built once per session from its conf entry (arguments validated then) and registers callbacks by kind
on `on_session_open`, exactly as Volcano's plugins call `ssn.AddJobOrderFn(name, fn)`. The session honours the
plugin's `enableXxx` flag for each kind and combines the callbacks tier by tier.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from extender.engine.arguments import Arguments

if TYPE_CHECKING:
    from extender.engine.session import Session


class Fn(Enum):
    """Callback kinds a plugin can register."""

    JOB_ORDER = "job_order"
    QUEUE_ORDER = "queue_order"
    VICTIM_QUEUE_ORDER = "victim_queue_order"
    TASK_ORDER = "task_order"
    JOB_READY = "job_ready"
    JOB_PIPELINED = "job_pipelined"
    JOB_VALID = "job_valid"
    JOB_STARVING = "job_starving"
    JOB_ENQUEUEABLE = "job_enqueueable"
    JOB_ENQUEUED = "job_enqueued"
    PREEMPTABLE = "preemptable"
    RECLAIMABLE = "reclaimable"
    OVERUSED = "overused"
    ALLOCATABLE = "allocatable"
    PREEMPTIVE = "preemptive"
    PREDICATE = "predicate"
    NODE_ORDER = "node_order"


# The conf flag that switches each kind; kinds not listed are always on (as in Volcano).
FLAG_OF: Final[dict[Fn, str]] = {
    Fn.JOB_ORDER: "enableJobOrder",
    Fn.QUEUE_ORDER: "enableQueueOrder",
    Fn.VICTIM_QUEUE_ORDER: "enableQueueOrder",
    Fn.TASK_ORDER: "enableTaskOrder",
    Fn.JOB_READY: "enableJobReady",
    Fn.JOB_PIPELINED: "enableJobPipelined",
    Fn.JOB_STARVING: "enableJobStarving",
    Fn.JOB_ENQUEUEABLE: "enableJobEnqueued",
    Fn.JOB_ENQUEUED: "enableJobEnqueued",
    Fn.PREEMPTABLE: "enablePreemptable",
    Fn.RECLAIMABLE: "enableReclaimable",
    Fn.OVERUSED: "enabledOverused",
    Fn.ALLOCATABLE: "enabledAllocatable",
    Fn.PREEMPTIVE: "enablePreemptive",
    Fn.PREDICATE: "enablePredicate",
    Fn.NODE_ORDER: "enableNodeOrder",
}


# Votes of JobEnqueueable / JobPipelined.
PERMIT: Final = 1
ABSTAIN: Final = 0
REJECT: Final = -1


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class KeyedOrder(Generic[T]):
    """An order callback (JobOrder, TaskOrder, QueueOrder) defined by a sort key: calling it compares the keys,
    so `compare(a, b) < 0` exactly when `key(a) < key(b)`. When every callback of a kind has a key, the session
    can sort by one tuple instead of walking the callbacks for every comparison."""

    key: Callable[[T], Any]

    def __call__(self, left: T, right: T) -> int:
        lk, rk = self.key(left), self.key(right)
        return (lk > rk) - (lk < rk)


class Plugin(Protocol):
    name: str

    def on_session_open(self, ssn: Session) -> None: ...

    def on_session_close(self, ssn: Session) -> None: ...


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


# A plugin's arguments are parsed once, when the conf is loaded (`conf.py`); what the parser returns is frozen and
# handed to the plugin's constructor for every session, so a bad argument is refused before any session runs.
PluginBuilder = Callable[[], Plugin]
PluginLoader = Callable[[Arguments], PluginBuilder]

PLUGINS: dict[str, PluginLoader] = {}
ACTIONS: dict[str, Callable[[], Action]] = {}

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


def register_action(name: str) -> Callable[[Callable[[], Action]], Callable[[], Action]]:
    def deco(factory: Callable[[], Action]) -> Callable[[], Action]:
        ACTIONS[name] = factory
        return factory

    return deco
