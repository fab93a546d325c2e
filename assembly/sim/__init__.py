"""The simulator: replay a workload of Nodes, Queues and Volcano Jobs over simulated time under a scheduler.

`load_workload(docs)` parses the workload, `simulate(workload, scheduler)` runs the discrete-event loop and
returns a `SimResult`; the schedulers are `LapilliScheduler` (the engine, one session per cycle) and
`DefaultScheduler` (kube-scheduler's per-pod baseline). `lapilli simulate` is the command line over these.
"""

from assembly.sim.kube_default import DefaultScheduler
from assembly.sim.lapilli_driver import SIM_CONF, LapilliScheduler, sim_conf
from assembly.sim.loop import JobOutcome, Scheduler, SimResult, simulate
from assembly.sim.workload import Workload, WorkloadError, load_workload

__all__ = [
    "SIM_CONF",
    "DefaultScheduler",
    "JobOutcome",
    "LapilliScheduler",
    "Scheduler",
    "SimResult",
    "Workload",
    "WorkloadError",
    "load_workload",
    "sim_conf",
    "simulate",
]
