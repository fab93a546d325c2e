"""Rendering the kustomize trees under manifests/ (kubectl's built-in kustomize) for the install tests."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
INSTALL = "install"
# Each tree a user applies, with the Kubernetes versions it is validated against (the ends of its range where
# kubernetes-validate has their schemas: none older than 1.22).
TREES = {
    INSTALL: ("1.29.0", "1.33.0", "1.37.0"),
    "overlays/k8s-1.25": ("1.25.0", "1.28.0"),
    "overlays/k8s-1.23": ("1.23.0", "1.24.0"),
    "overlays/k8s-1.20": ("1.22.0",),
}


def kustomizations() -> list[str]:
    return sorted(str(p.parent.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("kustomization.yaml"))


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl (with its built-in kustomize) is needed to render manifests/", pytrace=False)
    return path


@cache
def render_text(tree: str) -> str:
    done = subprocess.run([kubectl(), "kustomize", str(MANIFESTS / tree)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, f"kubectl kustomize manifests/{tree}: {done.stderr.strip()}"
    return done.stdout


def render(tree: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(tree)) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} in the render"
    return found[0]


def containers(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
