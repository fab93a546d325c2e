"""`lapilli serve`: run the Lapilli service (the container's command)."""

from __future__ import annotations

import asyncio
import logging
import signal

import click

from assembly.cli.flags import settings_options
from assembly.serve import Settings, SettingsError
from assembly.serve import serve as run_service
from lapilli.settings import from_flags


@click.command("serve")
@settings_options(Settings)
def serve(**flags: object) -> None:
    """Serve Volcano's admission webhook (Jobs, Queues, PodGroups, Pods) over TLS, with /healthz, /readyz
    and /metrics on the same port, and the scheduler extender (filter, prioritize, bind with the gang permit
    cache, preempt) with its scheduling session loop on the extender port, and Volcano's controllers (Jobs,
    Queues, PodGroups, Commands). Runs until SIGTERM or SIGINT."""
    settings = from_flags(Settings, flags)
    try:
        settings.check()
    except SettingsError as exc:
        raise click.UsageError(f"cannot start:\n{exc}") from None
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_main(settings))
    except Exception as exc:  # the edge of the process: one readable line, the traceback at debug level
        logging.getLogger("lapilli.serve").debug("fatal", exc_info=True)
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from None


async def _main(settings: Settings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await run_service(settings, stop)
