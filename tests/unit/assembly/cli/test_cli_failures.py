"""Every command that reads the cluster fails like a CLI: one or two lines, no traceback, within the request timeout,
whether the kubeconfig's exec credential plugin fails (a real script that exits 1 with its own message), the server
refuses connections, or the server accepts them and never answers (`--request-timeout 2s`).

Before: `lapilli job why` with a failing plugin waited forever (several lists each ran the plugin; the first failure
left the others running into the event loop's teardown) and `lapilli dashboard` printed a 74-line traceback. Now
requests sent together share one run of the plugin (checked: each command runs it once).
The liveness bound (pytest's timeout) is generous; the tests assert what was printed, not how long it took.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import sys
import textwrap
import threading
import time
import unittest.mock
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from assembly.cli import main

PLUGIN_MESSAGE = "the SSO session has expired; run 'corp-login' again"

# (command line, what it needs) for every verb that talks to the API server
COMMANDS = [
    ["queue", "create", "-n", "q1"],
    ["queue", "list"],
    ["queue", "get", "-n", "q1"],
    ["queue", "delete", "-n", "q1"],
    ["queue", "operate", "-n", "q1", "-a", "close"],
    ["job", "run", "-N", "j1"],
    ["job", "list"],
    ["job", "view", "-N", "j1"],
    ["job", "suspend", "-N", "j1"],
    ["job", "resume", "-N", "j1"],
    ["job", "delete", "-N", "j1"],
    ["job", "why", "j1"],
    ["dashboard", "--port", "0"],
]


def _kubeconfig(path: Path, server: str, user: dict[str, object]) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "current-context": "c",
    }))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def failing_plugin(tmp_path: Path) -> Path:
    script = tmp_path / "corp-login-plugin"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo run >> "{tmp_path / 'plugin-runs'}"
        echo "error: {PLUGIN_MESSAGE}" >&2
        exit 1
        """))
    script.chmod(0o755)
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}
    return _kubeconfig(tmp_path / "plugin.kubeconfig", f"https://127.0.0.1:{_free_port()}", {"exec": exec_})


@pytest.fixture
def refused(tmp_path: Path) -> Path:
    return _kubeconfig(tmp_path / "refused.kubeconfig", f"https://127.0.0.1:{_free_port()}", {"token": "t"})


@pytest.fixture
def silent(tmp_path: Path) -> Iterator[Path]:
    """A server that accepts connections and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        yield _kubeconfig(tmp_path / "silent.kubeconfig", f"https://127.0.0.1:{port}", {"token": "t"})


def _run(args: list[str], kubeconfig: Path, *extra: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, [*args, "--kubeconfig", str(kubeconfig), *extra], catch_exceptions=False)
    lines = [line for line in result.output.splitlines() if line.strip()]
    return result.exit_code, lines


def _one_line_error(code: int, lines: list[str], expected: str) -> None:
    assert code == 1, lines
    assert not any("Traceback" in line for line in lines), lines
    assert 1 <= len(lines) <= 2, lines
    assert lines[-1].startswith("Error: ") and expected in lines[-1], lines


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_failing_exec_plugin(args: list[str], failing_plugin: Path) -> None:
    code, lines = _run(args, failing_plugin)
    _one_line_error(code, lines, PLUGIN_MESSAGE)
    assert lines[-1].startswith("Error: no credentials for the API server:"), lines
    # Requests sent together (`job why` lists five kinds at once) share the one failed run.
    assert (failing_plugin.parent / "plugin-runs").read_text().splitlines() == ["run"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_unreachable_server(args: list[str], refused: Path) -> None:
    code, lines = _run(args, refused)
    _one_line_error(code, lines, "cannot reach the API server at https://127.0.0.1:")


@pytest.fixture
def hanging_plugin(tmp_path: Path) -> Iterator[Path]:
    """An exec plugin that never answers (one waiting for an interactive login), until the test ends."""
    waiting = tmp_path / "plugin-waits"
    waiting.touch()
    script = tmp_path / "login-plugin"
    script.write_text(f'#!/bin/sh\nwhile [ -e "{waiting}" ]; do sleep 0.1; done\nexit 1\n')
    script.chmod(0o755)
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(script)}
    yield _kubeconfig(tmp_path / "hanging.kubeconfig", f"https://127.0.0.1:{_free_port()}", {"exec": exec_})
    waiting.unlink()
    # kubernetes_asyncio leaves the plugin's process transport open when its run is cancelled: a command's process
    # exits with it, but here it would be collected, complaining that its loop is closed, during some later test.
    # Once the plugin has ended (its waitpid thread is gone), collect it quietly.
    for _ in range(600):
        if not any("waitpid" in t.name for t in threading.enumerate()):
            break
        time.sleep(0.1)
    with unittest.mock.patch.object(sys, "unraisablehook", lambda _unraisable: None):
        gc.collect()


SLOW = {"silent": "did not answer within 2s",
        "hanging_plugin": "credential source (an exec plugin, a token refresh) gave none within 2s"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("which", sorted(SLOW))
@pytest.mark.parametrize("args", [["queue", "list"], ["job", "why", "j1"], ["dashboard", "--port", "0"]],
                         ids=lambda a: " ".join(a[:2]))
def test_no_answer_ends_within_the_request_timeout(args: list[str], which: str,
                                                   request: pytest.FixtureRequest) -> None:
    """A server that never answers, or an exec plugin that never returns (waiting for an interactive login)."""
    code, lines = _run(args, request.getfixturevalue(which), "--request-timeout", "2s")
    _one_line_error(code, lines, SLOW[which])


def test_request_timeout_is_checked() -> None:
    result = CliRunner().invoke(main, ["queue", "list", "--request-timeout", "soon"])
    assert result.exit_code == 2 and "'soon' is not a duration" in result.output


def _state_dir(tmp_path: Path, kubeconfig: Path) -> Path:
    """A dev cluster's state dir whose one recorded process (this test's own) runs, with `kubeconfig`."""
    state = tmp_path / "dev"
    (state / "pids").mkdir(parents=True)
    (state / "cluster.json").write_text(json.dumps({
        "state_dir": str(state), "kubeconfig": str(kubeconfig), "server": "https://127.0.0.1:1", "kubernetes": "1.20",
        "ports": {}, "service": True, "extender": True, "etcd_data": "", "nodes": 1}))
    (state / "pids" / "self.json").write_text(json.dumps({
        "name": "kube-apiserver", "pid": os.getpid(), "start_ticks": 0, "argv": [], "log": "", "order": 0}))
    return state


@pytest.mark.timeout(120)
@pytest.mark.parametrize("which", ["failing_plugin", "refused"])
def test_dev_status_says_the_api_server_does_not_answer(which: str, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    state = _state_dir(tmp_path, request.getfixturevalue(which))
    result = CliRunner().invoke(main, ["dev", "status", "--state-dir", str(state)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("kube-apiserver:"))
    expected = PLUGIN_MESSAGE if which == "failing_plugin" else "cannot reach the API server"
    assert line.startswith("kube-apiserver: not answering: ") and expected in line, result.output
    assert "Traceback" not in result.output
    as_json = CliRunner().invoke(main, ["dev", "status", "--state-dir", str(state), "-o", "json"])
    assert json.loads(as_json.output)["api"]["answering"] is False
