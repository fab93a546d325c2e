"""What `lapilli queue` and `lapilli job` (Volcano's vcctl verbs) share: connection flags, Commands, formatting.

Counterparts: `pkg/cli/util/util.go` (CreateQueueCommand, CreateJobCommand, HumanDuration,
PopulateResourceListV1) and the flag helpers of `pkg/cli/{job,queue}`. The builders and formatters are pure;
`run_with_client` is the one place a verb touches the API server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, ParamSpec, TypeVar

import aiohttp
import click

from lapilli.api.constants import DEFAULT_QUEUE
from lapilli.kube import REQUEST_ERRORS, ApiError, ConfigError, KubeClient, KubeConfig, load_config
from lapilli.kube.resources import COMMANDS
from lapilli.meta import name_of, uid_of
from lapilli.resources import QuantityError, parse_quantity
from lapilli.times import parse_rfc3339_datetime, parse_seconds

P = ParamSpec("P")
T = TypeVar("T")

QUEUE_COMMAND_NAMESPACE = DEFAULT_QUEUE
"""vcctl creates queue Commands in the `default` namespace (a Queue itself has none)."""


REQUEST_TIMEOUT_S: Final = 30.0
"""How long a command waits for one request (credentials included) unless `--request-timeout` says otherwise."""
_TIMEOUT_KEY: Final = "lapilli.request_timeout_s"


def _timeout_option(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    try:
        seconds = parse_seconds(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if seconds <= 0:
        raise click.BadParameter(f"{value!r}: a command needs a timeout above 0")
    ctx.meta[_TIMEOUT_KEY] = seconds


def request_timeout() -> float:
    """The running command's `--request-timeout` (seconds)."""
    ctx = click.get_current_context(silent=True)
    return float(ctx.meta.get(_TIMEOUT_KEY, REQUEST_TIMEOUT_S)) if ctx is not None else REQUEST_TIMEOUT_S


def request_timeout_option(fn: Callable[P, T]) -> Callable[P, T]:
    """kubectl's `--request-timeout`, which bounds each request, credentials included (read back with
    `request_timeout()`)."""
    return click.option("--request-timeout", default=None, expose_value=False, callback=_timeout_option,
                        help=f"how long to wait for one request, credentials included (seconds or a duration "
                             f"such as 1m) [default: {REQUEST_TIMEOUT_S:g}s]")(fn)


def connection_options(fn: Callable[P, T]) -> Callable[P, T]:
    """vcctl's common flags: `-s/--master` and `-k/--kubeconfig`, and `--request-timeout`."""
    fn = request_timeout_option(fn)
    fn = click.option("-k", "--kubeconfig", type=click.Path(path_type=Path), default=None,
                      help="(optional) absolute path to the kubeconfig file [default: $KUBECONFIG, ~/.kube/config]")(fn)
    return click.option("-s", "--master", default="", help="the address of apiserver")(fn)


def connect(kubeconfig: Path | None, master: str) -> KubeConfig:
    """The connection a command uses; a kubeconfig that cannot be read is a one-line CLI error."""
    try:
        config = load_config(kubeconfig)
    except (ConfigError, OSError) as exc:
        raise click.ClickException(f"cannot load kubeconfig: {exc}") from None
    if master:
        config.override_server(master)
    return config


def failure(exc: BaseException, config: KubeConfig, timeout_s: float) -> click.ClickException | None:
    """A request failure as the one line a command ends with, or None for anything else (a bug)."""
    if isinstance(exc, ConfigError):  # credentials are loaded on first use (an exec plugin, an OIDC refresh)
        return click.ClickException(f"no credentials for the API server: {exc}")
    if isinstance(exc, ApiError):
        return click.ClickException(exc.message or str(exc))
    if isinstance(exc, TimeoutError):
        return click.ClickException(f"the API server at {config.server} did not answer within {timeout_s:g}s")
    if isinstance(exc, OSError) and not isinstance(exc, aiohttp.ClientError) and exc.filename:
        return click.ClickException(f"{exc.filename}: {exc.strerror or exc}")  # a local file (--conf, a token)
    if isinstance(exc, aiohttp.ClientError | OSError):
        return click.ClickException(f"cannot reach the API server at {config.server}: "
                                    f"{' '.join(str(exc).split()) or type(exc).__name__}")
    return None


def run_client(config: KubeConfig, work: Callable[[KubeClient], Awaitable[T]]) -> T:
    """Run `work` with a client of `config` bounded by the request timeout; any request failure becomes one line.
    Every command that reads the cluster goes through here (or `run_with_client`)."""
    timeout_s = request_timeout()

    async def main() -> T:
        async with KubeClient(config, request_timeout_s=timeout_s) as client:
            return await work(client)

    try:
        return asyncio.run(main())
    except REQUEST_ERRORS as exc:
        error = failure(exc, config, timeout_s)
        if error is None:
            raise
        raise error from None


def run_with_client(
    kubeconfig: Path | None, master: str, work: Callable[[KubeClient], Awaitable[T]],
) -> T:
    """Run one verb against the API server; API refusals and config problems become one-line CLI errors."""
    return run_client(connect(kubeconfig, master), work)


def controller_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`metav1.NewControllerRef(obj, kind)`."""
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": name_of(obj), "uid": uid_of(obj),
            "controller": True, "blockOwnerDeletion": True}


def make_command(target: Mapping[str, Any], action: str, namespace: str) -> dict[str, Any]:
    """The Command vcctl creates: `generateName: <target>-<action lower-cased>-`, owned by and aimed at the
    target object."""
    ref = controller_ref(target)
    return {
        "apiVersion": COMMANDS.api_version, "kind": COMMANDS.kind,
        "metadata": {"generateName": f"{ref['name']}-{action.lower()}-", "namespace": namespace,
                     "ownerReferences": [ref]},
        "target": ref, "action": action,
    }


def resource_list(spec: str) -> dict[str, str]:
    """`populateResourceListV1`: "cpu=1000m,memory=100Mi" -> {"cpu": "1000m", "memory": "100Mi"}."""
    if not spec:
        return {}
    out: dict[str, str] = {}
    for statement in spec.split(","):
        parts = statement.split("=")
        if len(parts) != 2:
            raise click.BadParameter(f"invalid argument syntax {statement}, expected <resource>=<value>")
        try:
            parse_quantity(parts[1])
        except QuantityError as exc:
            raise click.BadParameter(str(exc)) from None
        out[parts[0]] = parts[1]
    return out


def human_duration(seconds: float) -> str:
    """`HumanDuration` (k8s.io/apimachinery's duration.HumanDuration as vcctl copies it)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        return f"{hours // 24 // 365}y{(hours // 24) % 365}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: str | None, now: datetime | None = None) -> str:
    """`translateTimestampSince`: "<unknown>" for a missing time."""
    if not timestamp:
        return "<unknown>"
    then = parse_rfc3339_datetime(timestamp)
    return human_duration(((now or datetime.now(UTC)) - then).total_seconds())

