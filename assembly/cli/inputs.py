"""Reading the files a command is given: one line and exit code 2 for anything unusable."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click
import yaml


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
