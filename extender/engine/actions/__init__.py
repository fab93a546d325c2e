"""Scheduling actions; importing this package registers them."""

from importlib import import_module

for _name in ("enqueue", "allocate", "backfill", "preempt", "reclaim", "gangpreempt", "gangreclaim"):
    import_module(f"{__name__}.{_name}")  # a missing or broken module fails the import, loudly
