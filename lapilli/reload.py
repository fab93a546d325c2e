"""A configuration file re-read when its modification time changes, keeping the last good content.

What the scheduler conf (`--scheduler-conf`) and the webhook's resource groups (`--admission-conf`) share: at
start a bad file is refused by the settings check (the caller parses it before building this); later, a reload
that cannot be used — a parse error, an empty or unreadable file, the file gone — keeps the last good content in
use and is reported once per distinct problem (one log line and `on_error`), and `error` stays set until a good
file is loaded again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class ReloadingFile(Generic[T]):
    """`parse` turns the file's text into the value, raising ValueError with a readable reason when it cannot."""

    def __init__(self, path: Path, parse: Callable[[str], T], what: str,
                 on_error: Callable[[str], None] | None = None, on_load: Callable[[T], None] | None = None) -> None:
        self.path, self.what = path, what
        self._parse, self._on_error, self._on_load = parse, on_error, on_load
        self._mtime: float | None = path.stat().st_mtime
        self.value: T = parse(path.read_text())
        self.error = ""  # why the file on disk is not what is in use ("" when it is)
        if on_load is not None:
            on_load(self.value)

    def _failed(self, error: str) -> None:
        if error != self.error:
            self.error = error
            log.error("%s %s: %s; keeping the last good configuration", self.what, self.path, error)
            if self._on_error is not None:
                self._on_error(error)

    def refresh(self) -> T:
        """The value of the file as it is now (the last good one when it cannot be used)."""
        try:
            mtime = self.path.stat().st_mtime
        except OSError as exc:
            self._mtime = None  # whatever comes back in its place is read
            self._failed(f"cannot be read ({exc.strerror or exc})")
            return self.value
        if mtime == self._mtime:
            return self.value
        self._mtime = mtime
        try:
            value = self._parse(self.path.read_text())
        except (OSError, UnicodeDecodeError) as exc:
            self._mtime = None
            self._failed(f"cannot be read ({exc})")
        except ValueError as exc:
            self._failed(str(exc))
        else:
            self.value, self.error = value, ""
            log.info("%s %s reloaded", self.what, self.path)
            if self._on_load is not None:
                self._on_load(value)
        return self.value
