"""`lapilli dev up --scheduler-conf FILE`: the conf reaches `lapilli serve`, and one it would refuse is refused
before anything starts."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from assembly.cli import main
from assembly.dev.service import SCHEDULER_CONF, plan_service


def test_a_conf_that_cannot_run_is_refused_before_anything_starts(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text('actions: "allocate, gangpreempt"\ntiers: []\n'
                    "configurations: [{name: gangpreempt, arguments: {maxDomains: many}}]\n")
    state = tmp_path / "state"
    result = CliRunner().invoke(main, ["dev", "up", "--scheduler-conf", str(conf), "--state-dir", str(state)])
    assert result.exit_code == 2
    assert 'configurations (gangpreempt): argument maxDomains: "many" is not an integer' in result.output
    assert not state.exists(), "nothing was started"


def test_the_service_runs_the_conf_given_else_the_shipped_one(tmp_path: Path) -> None:
    conf = tmp_path / "mine.conf"
    conf.write_text('actions: "enqueue, allocate, preempt, reclaim, backfill"\ntiers: [{plugins: [{name: gang}]}]\n')
    given = plan_service(tmp_path / "a", tmp_path / "kc", 1, 2, scheduler_conf=conf)
    shipped = plan_service(tmp_path / "b", tmp_path / "kc", 1, 2)
    assert given is not None and shipped is not None
    assert given.argv[given.argv.index("--scheduler-conf") + 1] == str(conf.resolve())
    assert shipped.argv[shipped.argv.index("--scheduler-conf") + 1] == str(SCHEDULER_CONF.resolve())


def test_the_extender_port_is_tls_unless_asked_for_as_shipped(tmp_path: Path) -> None:
    """The dev cluster serves the extender over TLS with kube-scheduler's client certificate; benchmarks ask for the
    shipped pod's plain HTTP on loopback (manifests/scheduler: kube-scheduler beside the service)."""
    tls = plan_service(tmp_path / "a", tmp_path / "kc", 1, 2)
    plain = plan_service(tmp_path / "b", tmp_path / "kc", 1, 2, extender_over_tls=False)
    assert tls is not None and plain is not None
    assert tls.extender_url == "https://127.0.0.1:2/extender" and tls.extender_tls is not None
    assert "--extender-client-ca-file" in tls.argv
    assert plain.extender_url == "http://127.0.0.1:2/extender" and plain.extender_tls is None
    assert not [arg for arg in plain.argv if arg.startswith("--extender-tls") or arg == "--extender-client-ca-file"]
    assert "--extender-host" in plain.argv and plain.argv[plain.argv.index("--extender-host") + 1] == "127.0.0.1"
