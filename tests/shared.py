"""The steering files CI lays out beside the checkout (`../shared`): seed manifests and Volcano's reference.

Tests read them as `ROOT.parent / "shared"`, never by an absolute path. Where the whole folder is absent (a
checkout on its own) a test that needs it skips with that reason; where the folder is there but a file the test
names is not, the test fails: the layout it was written for changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def shared_path(*parts: str) -> Path:
    """`../shared/<parts>`: skips when `../shared` is absent, fails when it is there without this path."""
    if not SHARED.is_dir():
        pytest.skip(f"no {SHARED} beside the checkout")
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"{SHARED} is here but {path} is not", pytrace=False)
    return path
