"""skaffold.yaml and hack/kind.yaml (the kind + skaffold dev loop, which cannot run on these machines): skaffold.yaml
validates against skaffold's published JSON schema for its apiVersion, and what it names exists.

The schema is skaffold's own file (docs-v2/content/en/schemas/<version>.json in GoogleContainerTools/skaffold), so
it is not committed here and no package ships it: the check reads it from $LAPILLI_SKAFFOLD_SCHEMAS or from
../shared/reference/schemas/ beside the checkout (as CI lays it out: there a missing schema fails), and skips with
one line where neither is there."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.install.manifests import MANIFESTS, ROOT, render
from tests.shared import shared_path

SCHEMAS_ENV = "LAPILLI_SKAFFOLD_SCHEMAS"


def _schema_file(version: str) -> Path:
    name = f"skaffold-{version}.json"
    if not os.environ.get(SCHEMAS_ENV):
        return shared_path("reference", "schemas", name)
    path = Path(os.environ[SCHEMAS_ENV]) / name
    if not path.is_file():
        pytest.skip(f"skaffold's published schema {name} is not in ${SCHEMAS_ENV}")
    return path


def _config() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((ROOT / "skaffold.yaml").read_text()) if d]
    assert len(docs) == 1
    return docs[0]


def _errors(config: dict[str, Any]) -> list[str]:
    version = config["apiVersion"].removeprefix("skaffold/")
    schema_file = _schema_file(version)
    validator = jsonschema.Draft7Validator(json.loads(schema_file.read_text()))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(config)]


def test_skaffold_yaml_validates_against_its_published_schema():
    assert _errors(_config()) == []


@pytest.mark.parametrize(("where", "key"), [((), "deploys"), (("build", "artifacts", 0), "dockerfile"),
                                             (("portForward", 0), "remotePort")])
def test_the_schema_check_refuses_a_misspelt_field(where, key):
    broken = copy.deepcopy(_config())
    node: Any = broken
    for step in where:
        node = node[step]
    node[key] = "x"
    assert _errors(broken), f"{key} at {where} should be refused"


def test_what_skaffold_yaml_names_exists_and_renders():
    config = _config()
    for artifact in config["build"]["artifacts"]:
        for path in artifact["custom"]["dependencies"]["paths"]:
            assert (ROOT / artifact["context"] / path).exists(), path
        assert "hack/image.sh" in artifact["custom"]["buildCommand"]
    for path in config["manifests"]["kustomize"]["paths"]:
        objects = render(str((ROOT / path).relative_to(MANIFESTS)))
        images = {c["image"] for o in objects if o["kind"] == "Deployment"
                  for c in o["spec"]["template"]["spec"]["containers"]}
        built = {a["image"] for a in config["build"]["artifacts"]}
        assert any(i.split(":")[0] in built for i in images), "skaffold must find its image in the manifests"
        forwarded = {(f["resourceName"], f["port"]) for f in config["portForward"]}
        ports = {(o["metadata"]["name"], p["containerPort"]) for o in objects if o["kind"] == "Deployment"
                 for c in o["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
        assert forwarded <= ports, forwarded - ports


def test_kind_cluster_runs_a_kubernetes_the_install_is_for():
    kind = yaml.safe_load((ROOT / "hack" / "kind.yaml").read_text())
    assert kind["apiVersion"] == "kind.x-k8s.io/v1alpha4" and kind["kind"] == "Cluster"
    versions = {tuple(int(x) for x in n["image"].split(":v")[1].split(".")[:2]) for n in kind["nodes"]}
    assert len(versions) == 1 and min(versions) >= (1, 29), "the default install needs Kubernetes >= 1.29"
    assert sum(n["role"] == "worker" for n in kind["nodes"]) >= 2, "room for two replicas on separate nodes"
