"""Run one session: open it over a snapshot, execute the configured actions in order, close it, report."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from extender.engine import actions as _actions  # noqa: F401  (registers every action)
from extender.engine import plugins as _plugins  # noqa: F401  (registers every plugin)
from extender.engine.conf import SchedulerConf, load_conf
from extender.engine.framework import ACTIONS, PLUGINS
from extender.engine.results import Decisions, decisions
from extender.engine.session import Session
from extender.engine.snapshot import Snapshot


def known_plugins() -> frozenset[str]:
    return frozenset(PLUGINS)


def parse_scheduler_conf(text: str | None) -> SchedulerConf:
    """Volcano's scheduler configuration (YAML text); None means Volcano's default."""
    return load_conf(text, known_plugins())


def open_session(snapshot: Snapshot, conf: SchedulerConf, now: float = 0.0) -> Session:
    return Session(snapshot, conf, now)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one session.

    A session creates a few objects per pod and per placement (10^5 for 50,000 pods) and frees almost none of
    them until it ends, and none of them form garbage cycles while it runs; yet the allocations would trigger
    collections that traverse the caller's whole heap (the snapshot, watch caches) several times, ~15% of a
    large session. Reference counting still frees everything else; the collector resumes (if it was on) when the
    block exits and collects the finished session like any other garbage.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def run_session(snapshot: Snapshot, conf: SchedulerConf, now: float = 0.0) -> Decisions:
    with collector_paused():
        ssn = open_session(snapshot, conf, now)
        for name in conf.actions:
            ACTIONS[name]().execute(ssn)
        ssn.close()
        return decisions(ssn)
