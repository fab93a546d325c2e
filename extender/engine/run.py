"""Run one session: open it over a snapshot, execute the configured actions in order, close it, report."""

from __future__ import annotations

from contextlib import AbstractContextManager

from extender.engine import actions as _actions  # noqa: F401  (registers every action)
from extender.engine import plugins as _plugins  # noqa: F401  (registers every plugin)
from extender.engine.actions.registry import ACTION_ARGUMENTS, ACTIONS
from extender.engine.conf import Registry, SchedulerConf, load_conf
from extender.engine.interface import ExplainView, SessionProbe
from extender.engine.registry import PLUGINS
from extender.engine.results import Decisions, decisions
from extender.engine.session import Session
from extender.engine.snapshot import Snapshot
from extender.engine.statement import Statement
from lapilli import collector


def registry() -> Registry:
    """Every plugin and action the engine offers (importing this module registers them)."""
    return Registry(plugins=PLUGINS, actions=frozenset(ACTIONS), action_arguments=ACTION_ARGUMENTS)


def parse_scheduler_conf(text: str | None) -> SchedulerConf:
    """The one way to load a scheduler conf: Volcano's YAML `text` (None means Volcano's default conf), validated
    whole, plugin arguments included. Raises `ConfError` (one line) for what cannot run; names that are not offered
    are left out and listed in the result's `warnings`, which the caller reports once."""
    return load_conf(text, registry())


def open_session(snapshot: Snapshot, conf: SchedulerConf, now: float = 0.0,
                 probe: SessionProbe | None = None, parked: frozenset[str] = frozenset()) -> Session:
    return Session(snapshot, conf, now, probe, statements=Statement, parked=parked)


def open_view(snapshot: Snapshot, conf: SchedulerConf, now: float = 0.0) -> ExplainView:
    """A session as it stands when it opens, before any action, seen only through the view explain reads."""
    return open_session(snapshot, conf, now)


def collector_paused() -> AbstractContextManager[None]:
    """Pause Python's cyclic garbage collector for one session (`lapilli.collector.paused`, process-wide).

    A session creates a few objects per pod and per placement (10^5 for 50,000 pods) and frees almost none of
    them until it ends, and none of them form garbage cycles while it runs; yet the allocations would trigger
    collections that traverse the caller's whole heap (the snapshot, watch caches) several times, ~15% of a
    large session. Reference counting still frees everything else; the collector resumes (if it was on) when the
    last pause ends and collects the finished session like any other garbage.
    """
    return collector.paused()


def run_session(snapshot: Snapshot, conf: SchedulerConf, now: float = 0.0,
                probe: SessionProbe | None = None, parked: frozenset[str] = frozenset()) -> Decisions:
    """One session; a `probe` (explain's recorder) is told what it does and sees it before it closes. `parked`
    jobs are left out (`parking.py`): no result for them, and `Decisions.parkable` names the ones to park next."""
    with collector_paused():
        ssn = open_session(snapshot, conf, now, probe, parked)
        if probe is not None:
            probe.opened(ssn)
        evicted_by: dict[str, str] = {}
        for name in conf.actions:
            before = len(ssn.records.evictions)
            ACTIONS[name]().execute(ssn)
            evicted_by.update(dict.fromkeys(ssn.records.evictions[before:], name))
        if probe is not None:
            probe.closing(ssn)
        ssn.close()
        result = decisions(ssn)
        result.evicted_by = evicted_by
        if probe is None:  # a probe may read the session after this
            ssn.release()  # freed now, by reference counting, instead of walked when the collector resumes
        return result
