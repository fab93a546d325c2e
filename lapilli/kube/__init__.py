"""Writing to the cluster: the one small client every write goes through (kernel).

Also the raw request primitives that `lapilli.cluster` reflectors read with: `KubeClient.list` and
`KubeClient.watch` return plain JSON dicts.
"""

from lapilli.kube.client import PATCH_CONTENT_TYPES, REQUEST_ERRORS, KubeClient, ObjectList, PatchType
from lapilli.kube.config import ConfigError, KubeConfig, in_cluster_config, load_config, load_kubeconfig
from lapilli.kube.errors import AlreadyExists, ApiError, Conflict, Fenced, Gone, NotFound
from lapilli.kube.resources import Resource, resource_for
from lapilli.kube.watch import WatchEvent

__all__ = [
    "PATCH_CONTENT_TYPES",
    "REQUEST_ERRORS",
    "AlreadyExists",
    "ApiError",
    "ConfigError",
    "Conflict",
    "Fenced",
    "Gone",
    "KubeClient",
    "KubeConfig",
    "NotFound",
    "ObjectList",
    "PatchType",
    "Resource",
    "WatchEvent",
    "in_cluster_config",
    "load_config",
    "load_kubeconfig",
    "resource_for",
]
