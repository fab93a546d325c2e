"""TTL after a Job finished: when it expires."""

from controller.jobs.ttl import expires_at


def test_ttl_deadline():
    job = {"spec": {"ttlSecondsAfterFinished": 5},
           "status": {"state": {"phase": "Completed", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}
    assert expires_at(job) == 1767225600 + 5
    assert expires_at({**job, "spec": {}}) is None
    for phase in ("Aborted", "Running"):
        assert expires_at({**job, "status": {"state": {"phase": phase, "lastTransitionTime": "x"}}}) is None
