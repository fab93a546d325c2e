"""Reading the files a command is given: one line and exit code 2 for anything unusable."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
import yaml

from extender.engine.conf import ConfError, SchedulerConf


def fail(message: str) -> NoReturn:
    """Bad input: one line on stderr naming the file, the field and the problem; exit code 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def load_documents(path: Path) -> list[Any]:
    """The non-empty documents of a multi-document YAML file."""
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except OSError as exc:
        fail(f"{path}: {exc.strerror}")
    except yaml.YAMLError as exc:
        fail(f"{path}: not valid YAML: {' '.join(str(exc).split())}")


def load_conf(conf_file: Path | None, parse: Callable[[str | None], SchedulerConf]) -> SchedulerConf:
    """A scheduler conf from CONF_FILE (None: `parse`'s default), refused with one line naming plugin, argument and
    value; its warnings (unknown plugin or action names) go to stderr and the rest runs."""
    try:
        text = conf_file.read_text() if conf_file is not None else None
    except OSError as exc:
        fail(f"{conf_file}: {exc.strerror}")
    try:
        conf = parse(text)
    except ConfError as exc:
        fail(f"scheduler conf {conf_file}: {exc}")
    warn_conf(conf, str(conf_file))
    return conf


def warn_conf(conf: SchedulerConf, where: str) -> None:
    """What the conf left out (unknown plugin or action names), on stderr; the rest runs, as in the scheduler."""
    for warning in conf.warnings:
        click.echo(f"warning: scheduler conf {where}: {warning}", err=True)
