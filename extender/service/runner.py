"""Where sessions run, away from the event loop that answers the verbs.

`ThreadRunner` runs the engine in a worker thread over the service's own cluster state (tests, small clusters).
`ProcessRunner` runs it in a child process that keeps its own cluster state through its own reflectors, so a
session shares neither the interpreter lock nor the garbage collector with the verbs; only the plan's placements
go down the pipe, and only when the plan changed, and only the outcome comes back (shipping a 5,000-node snapshot
instead would cost ~200 ms of pickling per session on the verbs' side).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import multiprocessing as mp
import os
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from extender.engine.conf import SchedulerConf
from extender.service.pacing import Pacer
from extender.service.parking import Parking
from extender.service.plan import overlay
from extender.service.session import Outcome, run
from extender.service.state import ClusterState
from lapilli.devices.assign import PodDevices

log = logging.getLogger("lapilli.extender")

SESSION_NICENESS = 10  # added to the session process's niceness
_NO_DEVICES: dict[str, PodDevices] = {}  # one object, so a plan without cards is the same plan next time


class SessionRequest(NamedTuple):
    """Down the pipe: run a session with the plan's placements (and their vGPU cards) assumed, under this conf,
    with these pods idle-reclaimable (the leader's idle-GPU monitor keeps that set). `same_plan` means placements and
    devices were left out because the plan is the one sent last time."""

    placements: dict[str, str]
    conf: SchedulerConf
    idle: frozenset[str] = frozenset()
    devices: dict[str, PodDevices] = {}
    same_plan: bool = False


class SessionReply(NamedTuple):
    """Up the pipe: the outcome (None while not synced); `same_nodes` means its node index was left out because
    the node set is the one sent last time, `same_room` its nodes' allocatable and idle room, which are the ones sent
    last time."""

    outcome: Outcome | None
    same_nodes: bool
    same_room: bool = False


_NO_ROOM = np.zeros((0, 0))


class _LastSent:
    """What the session process sent last of what rarely changes between sessions, to leave it out next time: the
    node index (unpickling 5,000 names costs the verbs' process ~0.4 ms per session, and nodes come and go far less
    often than sessions run) and the nodes' room (two node-by-resource arrays, ~100 KB at 1,000 nodes with vGPU
    dimensions: in a settled cluster the same every session, and reading them through the pipe kept a thread of
    the verbs' process busy)."""

    def __init__(self) -> None:
        self.nodes: dict[str, int] | None = None
        self.room: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None

    def reply(self, outcome: Outcome) -> SessionReply:
        same_nodes = outcome.node_index == self.nodes
        same_room = (self.room is not None and np.array_equal(outcome.allocatable, self.room[0])
                     and np.array_equal(outcome.idle, self.room[1]))
        # Copies: the session's arrays may be the long-lived snapshot's, changed in place when a node changes.
        self.nodes, self.room = outcome.node_index, (outcome.allocatable.copy(), outcome.idle.copy())
        if same_nodes:
            outcome = dataclasses.replace(outcome, node_index={})
        if same_room:
            outcome = dataclasses.replace(outcome, allocatable=_NO_ROOM, idle=_NO_ROOM)
        return SessionReply(outcome, same_nodes, same_room)


def run_over(state: ClusterState, placements: dict[str, str], conf: SchedulerConf, pacer: Pacer,
             idle: frozenset[str] = frozenset(), nominations: dict[str, dict[str, str]] | None = None,
             devices: dict[str, PodDevices] | None = None, parking: Parking | None = None) -> Outcome:
    """One session over `state` with the plan's placements (and their vGPU cards) assumed and the `idle` pods
    idle-reclaimable; statuses compared with its stores, writes and events paced by what earlier sessions over the
    same state sent. `nominations`: the HyperNodes gang eviction nominated in earlier sessions and allocate has not
    redeemed (the last outcome's), which stay where sessions run: they never cross the pipe. Gangs parked by
    `parking` (which must observe `state`: `watch`) are left out."""
    # The plan keeps a pod it placed a while after the bind (`Plan.assumed`), for a copy that has not heard of it: one
    # this copy shows bound is where it is, neither assumed again nor a gang still on its way through bind.
    pods = state.snapshot.pods
    placements = {pod: node for pod, node in placements.items() if (p := pods.get(pod)) is None or not p.node_name}
    inputs = (idle, nominations or {}, devices or {})
    quiet = parking is not None and parking.quiet(conf, placements, inputs)
    snap = overlay(state.copy(), placements, devices)  # even a quiet session reads it off the event loop: a copy
    snap.idle_reclaimable = idle
    snap.nominations = nominations or {}
    return run(snap, conf, placements, state.store("PodGroup"), state.store("Queue"), pacer, parking=parking,
               base=state.snapshot, quiet=quiet, inputs=inputs)


def watch(state: ClusterState) -> Parking:
    """Parked gangs over `state`: a `Parking` told every change its snapshot takes."""
    parking = Parking()
    state.listeners.append(parking.observe)
    return parking


class SessionRunner(Protocol):
    async def __call__(self, placements: dict[str, str], conf: SchedulerConf,
                       idle: frozenset[str] = frozenset(),
                       devices: dict[str, PodDevices] | None = None) -> Outcome | None:
        """One session over the current cluster with `placements` (holding `devices`) assumed and the `idle` pods
        idle-reclaimable; None while not synced."""
        ...


class ThreadRunner:
    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.pacer = Pacer()
        self.parking = watch(state)
        self.nominations: dict[str, dict[str, str]] = {}

    async def __call__(self, placements: dict[str, str], conf: SchedulerConf,
                       idle: frozenset[str] = frozenset(),
                       devices: dict[str, PodDevices] | None = None) -> Outcome | None:
        if not self.state.synced:
            return None
        outcome = await asyncio.to_thread(run_over, self.state, placements, conf, self.pacer, idle,
                                          self.nominations, devices, self.parking)
        self.nominations = outcome.nominations
        return outcome


def _child(kubeconfig: str | None, device_configs: list[str], scheduler_names: list[str], conn: Connection) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s[session]: %(message)s")
    asyncio.run(_child_main(kubeconfig, device_configs, scheduler_names, conn))


async def _child_main(kubeconfig: str | None, device_configs: list[str], scheduler_names: list[str],
                      conn: Connection) -> None:
    from lapilli.kube import KubeClient, load_config

    async with KubeClient(load_config(Path(kubeconfig) if kubeconfig else None)) as client:
        state = ClusterState(client, device_configs=device_configs, scheduler_names=scheduler_names,
                             whole_pods=False)
        await state.start()
        await serve_sessions(state, conn)


async def serve_sessions(state: ClusterState, conn: Connection) -> None:
    """Answer (placements, conf) requests with outcomes until the parent closes the pipe. The state keeps
    following the cluster between requests (its reflectors run on this loop).

    What rarely changes between sessions goes down the pipe only when it changed (`_LastSent`)."""
    # A session is background work and a verb is on kube-scheduler's sequential path: when both want the same
    # core, the verb should get it (sessions at 5,000 nodes keep a core busy for a quarter second at a time).
    with contextlib.suppress(OSError):
        os.nice(SESSION_NICENESS)
    loop = asyncio.get_running_loop()
    pacer = Pacer()
    parking = watch(state)
    nominations: dict[str, dict[str, str]] = {}
    sent = _LastSent()
    plan: tuple[dict[str, str], dict[str, PodDevices]] = ({}, {})
    frozen = False
    while True:
        try:
            request: SessionRequest = await loop.run_in_executor(None, conn.recv)
            placements, conf, idle, devices, same_plan = request
            if same_plan:
                placements, devices = plan
            plan = placements, devices
            reply = SessionReply(None, False)
            if state.synced and not frozen:
                # The listed cluster is long-lived: keep it out of later full collections (as the verbs' process).
                gc.freeze()
                frozen = True
                log.info("session process synced: %d nodes, %d pods", len(state.snapshot.nodes),
                         len(state.snapshot.pods))
            if state.synced:
                outcome = await asyncio.to_thread(run_over, state, placements, conf, pacer, idle, nominations,
                                                  devices, parking)
                nominations = outcome.nominations
                reply = sent.reply(outcome)
            await loop.run_in_executor(None, conn.send, reply)
        except (EOFError, BrokenPipeError, ConnectionResetError):
            return  # the parent is gone (even a SIGKILLed one closes its end of the pipe)


class ProcessRunner:
    def __init__(
        self, kubeconfig: Path | None, target: Callable[..., None] = _child, args: tuple[object, ...] = (),
        device_configs: list[str] | None = None, scheduler_names: Iterable[str] = (),
    ) -> None:
        """`target(*args, conn)` is the child's main; by default it follows the cluster through `kubeconfig`, the
        vGPU device-config ConfigMaps `device_configs` ("namespace/name"), and counts pods of `scheduler_names` in
        the PodGroup they will have (`ClusterState`)."""
        self.kubeconfig = kubeconfig
        self._target = target
        self._args = args or (str(kubeconfig) if kubeconfig else None, list(device_configs or ()),
                              list(scheduler_names))
        self._conn: Connection | None = None
        self._proc: mp.process.BaseProcess | None = None
        self._lock = asyncio.Lock()
        self._nodes: dict[str, int] = {}  # the node index the child sent last
        self._room: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] = (_NO_ROOM, _NO_ROOM)  # and the room
        # The plan's dicts sent last. The plan rebuilds them when it changes and never changes them in place, so
        # the very same objects again mean the same plan: in a settled cluster it stays put session after session,
        # and pickling it (~1 ms for 2,000 pods' vGPU cards) held the interpreter lock the verbs wait for.
        self._plan: tuple[dict[str, str], dict[str, PodDevices]] | None = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=self._target, args=(*self._args, child), name="lapilli-session", daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self._nodes = {}
        self._room = (_NO_ROOM, _NO_ROOM)
        self._plan = None

    async def __call__(self, placements: dict[str, str], conf: SchedulerConf,
                       idle: frozenset[str] = frozenset(),
                       devices: dict[str, PodDevices] | None = None) -> Outcome | None:
        if self._proc is None or not self._proc.is_alive():
            log.warning("session process is not running; restarting it")
            self.start()
        assert self._conn is not None
        conn = self._conn
        loop = asyncio.get_running_loop()
        devices = _NO_DEVICES if devices is None else devices
        async with self._lock:
            if self._plan is not None and self._plan[0] is placements and self._plan[1] is devices:
                request = SessionRequest({}, conf, idle, {}, same_plan=True)
            else:
                request = SessionRequest(placements, conf, idle, devices)
            await loop.run_in_executor(None, conn.send, request)
            self._plan = placements, devices
            reply: SessionReply = await loop.run_in_executor(None, conn.recv)
        outcome = reply.outcome
        if outcome is not None:
            # What was left out is the very object sent before: later comparisons of it start with identity.
            if reply.same_nodes:
                outcome.node_index = self._nodes
            if reply.same_room:
                outcome.allocatable, outcome.idle = self._room
            self._nodes, self._room = outcome.node_index, (outcome.allocatable, outcome.idle)
        return outcome

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            self._proc.terminate()
            self._proc.join(timeout=5)
            if self._proc.is_alive():
                self._proc.kill()
        self._conn = self._proc = None
