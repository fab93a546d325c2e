"""Run one session: open it over a snapshot, execute the configured actions in order, close it, report."""

from __future__ import annotations

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


def run_session(snapshot: Snapshot, conf: SchedulerConf, now: float = 0.0) -> Decisions:
    ssn = open_session(snapshot, conf, now)
    for name in conf.actions:
        ACTIONS[name]().execute(ssn)
    ssn.close()
    return decisions(ssn)
