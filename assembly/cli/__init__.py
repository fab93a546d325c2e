"""The `lapilli` command line: one click group whose subcommands live in their own modules.

Subcommands are imported lazily so `lapilli schedule` does not pay for aiohttp or kubernetes_asyncio.
To add one, put a click command in a module of this package and name it in `_COMMANDS`.
"""

from __future__ import annotations

import importlib
import logging

import click

# name -> "module:attribute" (relative to this package)
_COMMANDS: dict[str, str] = {
    "dashboard": "dashboard:dashboard",
    "dev": "dev:dev",
    "job": "job:job",
    "queue": "queue:queue",
    "certs": "certs:certs",
    "schedule": "schedule:schedule",
    "serve": "serve:serve",
    "simulate": "simulate:simulate",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        module = importlib.import_module(f"{__name__}.{module_name}")
        command: click.Command = getattr(module, attr)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Lapilli: Volcano-style batch scheduling for stock Kubernetes."""
    # kubernetes_asyncio logs a failed credential plugin as an error before raising it; the command says it once,
    # in its own error line. (Where logging is configured, as in `lapilli serve`, the record still reaches it.)
    logging.getLogger("kubernetes_asyncio").addHandler(logging.NullHandler())
