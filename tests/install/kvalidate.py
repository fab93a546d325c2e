"""kubernetes-validate --strict for every Kubernetes version an install tree is for.

The installed kubernetes-validate (a dev dependency) carries the schemas of its last 13 minor versions (1.25 to
1.37 in 1.37.0); the overlays for older clusters are checked against its 1.33.1 release, the same code with the
schemas of 1.22 to 1.33. That release is installed once with pip into the cache and run as a process of its own
(`python kvalidate.py` with it first on the path), since both are the module `kubernetes_validate`.

Run as a script, this file reads `{"version": ..., "objects": [...]}` on stdin and writes the outcomes as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import kubernetes_validate
from kubernetes_validate.utils import SchemaNotFoundError, all_versions

OLDER_RELEASE = "1.33.1"
NO_SCHEMA = "no schema"
"""The outcome for a kind (at its apiVersion) that Kubernetes version has no schema for."""


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def outcomes(objects: list[dict[str, Any]], version: str) -> list[str | None]:
    """One outcome per object: None (valid), NO_SCHEMA, or the first error with its path."""
    if _minor(version) >= min(map(_minor, all_versions())):
        return _validate(objects, version)
    done = subprocess.run(
        [sys.executable, __file__], input=json.dumps({"version": version, "objects": objects}), text=True,
        capture_output=True, timeout=300, env={**os.environ, "PYTHONPATH": str(_older_release())},
    )
    assert done.returncode == 0, f"kubernetes-validate {OLDER_RELEASE} for {version}: {done.stderr[-2000:]}"
    return json.loads(done.stdout)


def _validate(objects: list[dict[str, Any]], version: str) -> list[str | None]:
    out: list[str | None] = []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
            out.append(None)
        except SchemaNotFoundError:
            out.append(NO_SCHEMA)
        except kubernetes_validate.ValidationError as exc:
            out.append(f"{exc.message} at {'/'.join(map(str, exc.path))}")
    return out


def _older_release() -> Path:
    """kubernetes-validate OLDER_RELEASE, installed (without its dependencies: the venv has them) once under
    `${XDG_CACHE_HOME:-~/.cache}/lapilli/`."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lapilli"
    target = cache / f"kubernetes-validate-{OLDER_RELEASE}"
    if (target / "kubernetes_validate").is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".kubernetes-validate-"))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
             "--target", str(staging), f"kubernetes-validate=={OLDER_RELEASE}"],
            capture_output=True, text=True, timeout=600,
        )
        assert done.returncode == 0, f"pip install kubernetes-validate=={OLDER_RELEASE}: {done.stderr[-2000:]}"
        try:
            staging.rename(target)
        except OSError:  # another test process got there first
            if not (target / "kubernetes_validate").is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


if __name__ == "__main__":
    request = json.load(sys.stdin)
    json.dump(_validate(request["objects"], request["version"]), sys.stdout)
