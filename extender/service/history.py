"""The leader's short history for the dashboard (`lapilli.history`): every `--history-interval` it samples what the
last session gave each queue (GPUs allocated, deserved), notes when each job started running and how long it had
waited, keeps a day of it, and writes it to the ConfigMap `lapilli-system/lapilli-history`. A new leader reads that
ConfigMap first and carries on. Cost: one small ConfigMap write per interval (5 minutes by default).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from extender.engine.results import resource_amounts
from extender.service.session import Outcome
from lapilli.history import HISTORY_CONFIGMAP, HISTORY_KEY, HISTORY_NAMESPACE, History, Started
from lapilli.kube import REQUEST_ERRORS, KubeClient, NotFound
from lapilli.kube.resources import CONFIG_MAPS

log = logging.getLogger("lapilli.extender")


def amounts(outcome: Outcome, resource: str) -> dict[str, tuple[float, float | None]]:
    """queue -> (allocated, deserved) of `resource` as a session left them, in people's units."""
    out: dict[str, tuple[float, float | None]] = {}
    for name, queue in sorted(outcome.queues.items()):
        allocated = resource_amounts(outcome.dims, queue.allocated).get(resource, 0.0)
        deserved = None if queue.deserved is None else resource_amounts(outcome.dims, queue.deserved).get(resource, 0.0)
        out[name] = (allocated, deserved)
    return out


class HistoryLoop:
    def __init__(self, latest: Callable[[], Outcome | None], client: KubeClient, *, interval_s: float = 300.0,
                 is_leader: Callable[[], bool] = lambda: True, clock: Callable[[], float] = time.time) -> None:
        """`latest`: the session loop's last outcome (None before the first session)."""
        self.latest, self.client, self.interval_s = latest, client, interval_s
        self.is_leader, self.clock = is_leader, clock
        self.history: History | None = None  # None until read back from the cluster this term
        self._pending: list[Started] = []  # jobs that started before the record was read

    def started(self, key: str, queue: str, created: float, started: float) -> None:
        """The session loop saw `key` start running."""
        job = Started(key, queue, created, started)
        if self.history is None:
            self._pending.append(job)
        else:
            self.history.add_started(job)

    async def run_forever(self) -> None:
        while True:
            sampled = False
            if self.is_leader():
                try:
                    sampled = await self.run_once()
                except Exception:
                    log.exception("history sample failed; retrying next interval")
            else:
                self.history, self._pending = None, []  # the next term starts from what the cluster holds
            # Until the first sample of a term (no session yet), look again soon rather than an interval later.
            await asyncio.sleep(self.interval_s if sampled else min(self.interval_s, 5.0))

    async def run_once(self) -> bool:
        """Sample and write; False when there is no session to sample yet or the write failed."""
        if self.history is None:
            self.history = await self._read()
            for job in self._pending:
                self.history.add_started(job)
            self._pending = []
        outcome = self.latest()
        if outcome is None:
            return False
        now = self.clock()
        self.history.sample(now, amounts(outcome, self.history.resource))
        self.history.trim(now)
        return await self._write(self.history.to_json())

    async def _read(self) -> History:
        try:
            cm = await self.client.get(CONFIG_MAPS, HISTORY_CONFIGMAP, HISTORY_NAMESPACE)
        except NotFound:
            return History()
        except REQUEST_ERRORS as exc:
            log.warning("history ConfigMap not read (%s); starting a new one", exc)
            return History()
        try:
            return History.from_json(str((cm.get("data") or {}).get(HISTORY_KEY) or ""))
        except ValueError as exc:
            log.warning("history ConfigMap %s/%s unreadable (%s); starting a new one", HISTORY_NAMESPACE,
                        HISTORY_CONFIGMAP, exc)
            return History()

    async def _write(self, text: str) -> bool:
        data: dict[str, Any] = {"data": {HISTORY_KEY: text}}
        try:
            try:
                await self.client.patch(CONFIG_MAPS, HISTORY_CONFIGMAP, data, HISTORY_NAMESPACE)
            except NotFound:
                await self.client.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": HISTORY_CONFIGMAP, "namespace": HISTORY_NAMESPACE}, **data}, HISTORY_NAMESPACE)
        except REQUEST_ERRORS as exc:
            log.warning("history ConfigMap not written: %s", exc)
            return False
        return True
