"""Python's cyclic garbage collector paused around bursts of long-lived allocation.

Decoding a list of 50,000 pods creates ~10^7 objects (dicts, lists, strings) that live as long as the watch cache
and never form cycles; with the collector running, the allocations trigger collections that walk the growing heap
again and again (decoding 10,000 pods took 1.5 s of CPU with it, 0.19 s without). A scheduling session likewise
creates a few objects per pod and frees them together when it ends. `paused` is process-wide and nests: the
collector resumes (if it was on) when the last pause in any thread ends. (A process that keeps such a cache also
freezes it once synced, `gc.freeze`, so later full collections do not walk it either.)
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection while the block runs (in any thread)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()

