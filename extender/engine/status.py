"""kube-scheduler's `framework.Status`: an outcome code with its reason, the engine's way to say why not.

Mirrors `pkg/scheduler/framework/interface.go`: Unschedulable may be fixed by preemption (evicting pods),
UnschedulableAndUnresolvable may not; kube-scheduler tries preemption only on nodes that failed with the former,
which the extender wire expresses as `FailedNodes` vs `FailedAndUnresolvableNodes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final


class Code(Enum):
    """kube-scheduler's `framework.Code`: Unschedulable may be fixed by preemption (evicting pods), while
    UnschedulableAndUnresolvable may not, so kube-scheduler tries preemption only on nodes that failed with the
    former (`FailedNodes` vs `FailedAndUnresolvableNodes` at the extender wire)."""

    SUCCESS = "Success"
    ERROR = "Error"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class Status:
    """An outcome with its one-line reason (`Status(UNSCHEDULABLE, "0/3 nodes are unavailable: 3 Insufficient
    cpu.")`); outcomes are values, exceptions are for bugs."""

    code: Code = Code.SUCCESS
    message: str = ""

    @property
    def success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def unresolvable(self) -> bool:
        return self.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


SUCCESS: Final = Status()
