"""The controllers face: Volcano's vc-controller-manager for stock Kubernetes.

* Job controller (`controller.jobs`): a Volcano Job becomes its PodGroup `<job>-<uid>`, pods `<job>-<task>-<i>`
  (once the PodGroup is admitted), the job plugins' Service / ConfigMap / Secret / NetworkPolicy; lifecycle
  policies, the full state machine, status, Events, TTL after finishing, and cleanup when it is deleted.
* Queue controller (`controller.queues`): queue state (Open / Closing / Closed), PodGroup counts, `root` and
  `default` always present.
* PodGroup controller (`controller.podgroups`): plain pods for Volcano's scheduler get a PodGroup of their own.
* Commands (`controller.commands`): AbortJob / ResumeJob / OpenQueue / CloseQueue, each at most once.

`Controllers` (`controller.manager`) runs them all as one component of `lapilli serve`. Pure decisions live in
plain modules with unit tests; the I/O loops are thin. Imports only the kernel (`lapilli.*`), never another face.
"""

from controller.manager import Controllers
from controller.settings import ControllerSettings

__all__ = ["ControllerSettings", "Controllers"]
