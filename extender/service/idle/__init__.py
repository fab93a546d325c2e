"""Idle-GPU reclaim, the service's part (issue 21): utilisation read from Prometheus, idle windows kept, jobs warned
and marked on the leader; the engine gets the marked pods as `Snapshot.idle_reclaimable`."""
