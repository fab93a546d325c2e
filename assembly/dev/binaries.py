"""Finding kube-apiserver, kube-scheduler and etcd, and the Kubernetes version they are.

Order: `LAPILLI_K8S_BIN=DIR` (any kube-apiserver/kube-scheduler pair), else the build cache that
`hack/build-k8s.sh` fills. etcd comes from that directory or PATH. Missing pieces raise
`BinariesNotFound` with the reason and the remedy: the e2e tier fails loudly with it, never skips.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class BinariesNotFound(RuntimeError):
    """kube-apiserver, kube-scheduler or etcd cannot be found or run."""


@dataclass(frozen=True, slots=True)
class Binaries:
    apiserver: Path
    scheduler: Path
    etcd: Path
    version: tuple[int, int]  # (major, minor) of kube-apiserver

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lapilli"


def _cached_bin_dirs(env: Mapping[str, str]) -> list[Path]:
    # `.complete` is written last by hack/build-k8s.sh: a directory without it is a build that died half-way.
    return sorted((p.parent for p in cache_root(env).glob("kubernetes-*/bin/.complete")), reverse=True)


def kube_version(apiserver: Path) -> tuple[int, int]:
    """(major, minor) from `kube-apiserver --version` ("Kubernetes v1.20.2")."""
    try:
        out = subprocess.run([str(apiserver), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BinariesNotFound(f"{apiserver} does not run: {exc}") from exc
    match = re.search(r"v(\d+)\.(\d+)", out)
    if not match:
        raise BinariesNotFound(f"cannot read a version from `{apiserver} --version`: {out.strip()!r}")
    return int(match[1]), int(match[2])


def find_binaries(env: Mapping[str, str] = os.environ) -> Binaries:
    """Locate the three binaries or raise `BinariesNotFound` saying what is missing and how to get it."""
    chosen = env.get("LAPILLI_K8S_BIN")
    if chosen:
        bin_dir = Path(chosen)
        origin = f"LAPILLI_K8S_BIN={chosen}"
    else:
        dirs = _cached_bin_dirs(env)
        if not dirs:
            raise BinariesNotFound(
                f"no kube-apiserver/kube-scheduler: LAPILLI_K8S_BIN is unset and {cache_root(env)} holds no finished "
                "build; run `make k8s` (hack/build-k8s.sh, ~5 min) or point LAPILLI_K8S_BIN at a directory with both"
            )
        bin_dir, origin = dirs[0], f"the build cache ({dirs[0]})"
    found: dict[str, Path] = {}
    for name in ("kube-apiserver", "kube-scheduler"):
        path = bin_dir / name
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BinariesNotFound(f"{origin} has no executable {name}")
        found[name] = path
    etcd = bin_dir / "etcd"
    if not (etcd.is_file() and os.access(etcd, os.X_OK)):
        which = shutil.which("etcd", path=env.get("PATH"))
        if which is None:
            raise BinariesNotFound(f"no etcd in {bin_dir} or on PATH (Debian: apt-get install etcd-server)")
        etcd = Path(which)
    return Binaries(found["kube-apiserver"], found["kube-scheduler"], etcd, kube_version(found["kube-apiserver"]))
