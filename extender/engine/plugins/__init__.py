"""Scheduler plugins; importing this package registers them."""

from importlib import import_module

for _name in (
    "gang",
    "priority",
    "conformance",
    "drf",
    "proportion",
    "capacity",
    "overcommit",
    "predicates",
    "nodeorder",
    "binpack",
    "task_topology",
    "deviceshare",
    "fairshare",
    "network_topology",
):
    import_module(f"{__name__}.{_name}")  # a missing or broken module fails the import, loudly
