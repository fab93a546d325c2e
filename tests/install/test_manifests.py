"""The install as kustomize renders it: every tree renders, validates against the Kubernetes versions it is for
(kubernetes-validate --strict, offline schemas), and holds what the deployment relies on."""

from __future__ import annotations

from typing import Any

import click
import jsonpatch
import jsonschema
import pytest
import yaml

from assembly.cli import main as cli
from tests.install.kvalidate import NO_SCHEMA, outcomes
from tests.install.manifests import INSTALL, ROOT, TREES, containers, find, kustomizations, render, render_text


@pytest.mark.parametrize("tree", kustomizations())
def test_every_kustomization_renders(tree):
    assert render(tree), f"manifests/{tree} renders nothing"


def _crd_schemas(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for crd in (o for o in objects if o["kind"] == "CustomResourceDefinition"):
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            out[key] = version["schema"]["openAPIV3Schema"]
    return out


def _errors(objects: list[dict[str, Any]], version: str) -> list[str]:
    """kubernetes-validate --strict on every object. It only warns on a kind it has no schema for (a FlowSchema
    of an apiVersion that Kubernetes version does not serve would pass), so that is an error here; objects of
    the install's own CRDs are checked against the CRD's schema instead."""
    crds, errors = _crd_schemas(objects), []
    for obj, outcome in zip(objects, outcomes(objects, version), strict=True):
        what = f"{obj['kind']} {obj['metadata']['name']} ({obj['apiVersion']})"
        if outcome == NO_SCHEMA:
            schema = crds.get((obj["apiVersion"], obj["kind"]))
            if schema is None:
                errors.append(f"{what}: Kubernetes {version} has no such kind")
            else:
                errors += [f"{what}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(obj)]
        elif outcome is not None:
            errors.append(f"{what}: {outcome}")
    return errors


@pytest.mark.parametrize(("tree", "version"), [(t, v) for t, versions in TREES.items() for v in versions])
def test_install_validates_strictly(tree, version):
    assert _errors(render(tree), version) == []


@pytest.mark.parametrize(("tree", "version"), [("overlays/k8s-1.20", "1.29.0"), ("overlays/k8s-1.23", "1.22.0")])
def test_validation_catches_an_api_version_the_cluster_does_not_serve(tree, version):
    """The check above can fail, with the installed schemas and the older release's: the 1.20 overlay's
    FlowSchemas (v1beta1) are not served by 1.29, the 1.23 overlay's (v1beta2) not by 1.22."""
    errors = _errors(render(tree), version)
    assert any("FlowSchema" in e and "no such kind" in e for e in errors), errors


@pytest.mark.parametrize("tree", TREES)
def test_kube_scheduler_listens_in_plain_http_on_loopback_only(tree):
    """kube-scheduler 1.20-1.22 serves healthz and metrics without authentication on a second port (0.0.0.0:10251
    unless its configuration says otherwise); where the configuration has that port, it is on 127.0.0.1."""
    config_map = next(o for o in render(tree) if o["kind"] == "ConfigMap"
                      and o["metadata"]["name"].startswith("lapilli-scheduler-config"))
    config = yaml.safe_load(config_map["data"]["config.yaml"])
    addresses = {config[k] for k in ("healthzBindAddress", "metricsBindAddress") if k in config}
    assert all(a.startswith("127.0.0.1:") for a in addresses), addresses
    assert bool(addresses) == config["apiVersion"].endswith("/v1beta1"), "only v1beta1 (1.20-1.22) has that port"


def _serve_options() -> set[str]:
    command = cli.get_command(click.Context(cli), "serve")
    assert command is not None
    return {opt.split("=")[0] for p in command.params for opt in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize(("deployment", "container"), [("lapilli", "lapilli"), ("lapilli-scheduler", "extender")])
def test_lapilli_containers_pass_only_flags_serve_has(deployment, container):
    args = containers(find(render(INSTALL), "Deployment", deployment))[container]["args"]
    unknown = [a for a in args if a.split("=")[0] not in _serve_options()]
    assert unknown == [], f"`lapilli serve` has no such flag: {unknown}"


@pytest.mark.parametrize("deployment", ["lapilli", "lapilli-scheduler"])
def test_deployments_are_hardened_and_highly_available(deployment):
    objects = render(INSTALL)
    d = find(objects, "Deployment", deployment)
    spec = d["spec"]["template"]["spec"]
    assert d["spec"]["replicas"] == 2
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, c["name"]
        assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"], c["name"]
        assert "livenessProbe" in c, c["name"]
    selector = d["spec"]["selector"]["matchLabels"]
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget" and o["spec"]["selector"]["matchLabels"]
               == selector]
    assert len(budgets) == 1 and budgets[0]["spec"]["minAvailable"] == 1


def test_extender_is_reachable_from_its_own_pod_only():
    """kube-scheduler calls the extender beside it on loopback; the extender listens there and nowhere else, and
    no Service or container port exposes it."""
    objects = render(INSTALL)
    pod = containers(find(objects, "Deployment", "lapilli-scheduler"))
    assert "--extender-host=127.0.0.1" in pod["extender"]["args"]
    assert [p["containerPort"] for p in pod["extender"]["ports"]] == [8081], "only the metrics port"
    assert "--metrics-port=8081" in pod["extender"]["args"]
    config_maps = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith(
        "lapilli-scheduler-config")]
    config = yaml.safe_load(config_maps[0]["data"]["config.yaml"])
    assert {e["urlPrefix"].split("/")[2] for e in config["extenders"]} == {"127.0.0.1:8080"}
    assert config["leaderElection"]["resourceName"] in " ".join(pod["extender"]["args"])
    services = [o for o in objects if o["kind"] == "Service"]
    assert [p["targetPort"] for s in services for p in s["spec"]["ports"]] == ["webhook"]


def test_install_has_no_manual_certificate_step():
    """No Secret to make by hand: the service provisions it (and the webhook configurations ship without a CA)."""
    text = render_text(INSTALL)
    objects = render(INSTALL)
    assert not [o for o in objects if o["kind"] == "Secret"]
    assert "caBundle" not in text
    args = containers(find(objects, "Deployment", "lapilli"))["lapilli"]["args"]
    assert any(a.startswith("--tls-secret=") for a in args) and any(a.startswith("--ca-bundle-file=") for a in args)


_SELECTOR = ("spec", "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties", "members",
             "items", "properties", "selector")


def _selector_rules(tree: str) -> list[str]:
    node: Any = find(render(tree), "CustomResourceDefinition", "hypernodes.topology.volcano.sh")
    for key in _SELECTOR:
        node = node[key]
    return [rule["rule"] for rule in node.get("x-kubernetes-validations", [])]


@pytest.mark.parametrize("tree", [*TREES, "overlays/kind"])
def test_hypernode_selector_cel_rules_ship_where_the_cluster_serves_them(tree):
    """Volcano's two rules on a member's selector (one of the three, at most one) where CRD validation rules exist
    (Kubernetes >= 1.25); the trees for older clusters go without, as the base CRD `lapilli dev up` installs."""
    rules = _selector_rules(tree)
    if tree in ("overlays/k8s-1.20", "overlays/k8s-1.23"):
        assert rules == []
    else:
        assert len(rules) == 2 and "has(self.exactMatch) || has(self.regexMatch)" in rules[0] and "<= 1" in rules[1]



def test_readmes_resource_group_patch_removes_the_pod_mutation_selector():
    """README's overlay patch for resource groups names the mutating pod webhook by index: keep them in step."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("target: {kind: MutatingWebhookConfiguration, name: lapilli-mutating}"):]
    path = block[block.index("path: ") + len("path: "):].split()[0]
    config = find(render("install"), "MutatingWebhookConfiguration", "lapilli-mutating")
    patched = jsonpatch.apply_patch(config, [{"op": "remove", "path": path}])
    hook = next(h for h in patched["webhooks"] if h["name"] == "mutatepod.volcano.sh")
    assert "objectSelector" not in hook
