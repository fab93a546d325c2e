"""The controllers' Kubernetes Events: the kernel's recorder (`lapilli.kube.events`), reporting as
`lapilli-controller`."""

from __future__ import annotations

from typing import Final

from lapilli.kube import KubeClient
from lapilli.kube.events import EventRecorder as KernelRecorder

COMPONENT: Final = "lapilli-controller"


class EventRecorder(KernelRecorder):
    def __init__(self, client: KubeClient, *, concurrency: int = 8) -> None:
        super().__init__(client, COMPONENT, concurrency=concurrency)
