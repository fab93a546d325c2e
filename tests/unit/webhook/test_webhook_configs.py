"""Webhook configurations rendered from the route table, and the shipped manifests that must match them."""

import base64
from pathlib import Path

import pytest
import yaml

from webhook.configs import ServiceRef, ca_bundle_patch, render
from webhook.routes import ROUTES

MANIFESTS = Path(__file__).resolve().parents[3] / "manifests" / "webhook"


def hooks(configs):
    return {hook["name"]: hook for config in configs for hook in config["webhooks"]}


def test_url_configuration_for_the_dev_cluster():
    mutating, validating = render(url="https://127.0.0.1:9443/", ca_bundle=b"PEM")
    assert mutating["kind"] == "MutatingWebhookConfiguration"
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    by_name = hooks([mutating, validating])
    assert set(by_name) == {r.name for r in ROUTES}
    for route in ROUTES:
        hook = by_name[route.name]
        assert hook["clientConfig"] == {
            "url": f"https://127.0.0.1:9443{route.path}",
            "caBundle": base64.b64encode(b"PEM").decode(),
        }
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["rules"][0]["operations"] == list(route.operations)
        assert (hook in mutating["webhooks"]) == route.mutating
    assert by_name["validatejob.volcano.sh"]["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert by_name["validatequeue.volcano.sh"]["rules"][0]["scope"] == "Cluster"


def test_failure_policies_and_selectors():
    by_name = hooks(render(service=ServiceRef()))
    for name, hook in by_name.items():
        assert hook["namespaceSelector"] == {
            "matchExpressions": [{"key": "lapilli.io/webhook", "operator": "NotIn", "values": ["disabled"]}]
        }
        if "pod." in name:
            assert hook["failurePolicy"] == "Ignore"
            assert hook["objectSelector"] == {
                "matchExpressions": [{"key": "volcano.sh/job-name", "operator": "Exists"}]
            }
        else:
            assert hook["failurePolicy"] == "Fail"
            assert "objectSelector" not in hook


def test_with_resource_groups_the_mutating_pod_webhook_sees_every_pod():
    mutating, validating = render(url="https://127.0.0.1:9443", all_pods=True)
    pods = {hook["name"]: hook for config in (mutating, validating) for hook in config["webhooks"]
            if "pod." in hook["name"]}
    assert "objectSelector" not in pods["mutatepod.volcano.sh"]
    assert pods["validatepod.volcano.sh"]["objectSelector"]  # the budget check stays on Job pods
    assert pods["mutatepod.volcano.sh"]["failurePolicy"] == "Ignore"


def test_only_https_urls():
    with pytest.raises(ValueError, match="https"):
        render(url="http://127.0.0.1:9443")


def test_shipped_manifests_are_the_rendered_ones():
    shipped = [yaml.safe_load((MANIFESTS / name).read_text()) for name in ("mutating.yaml", "validating.yaml")]
    assert shipped == render(service=ServiceRef())
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    assert kustomization["resources"] == ["mutating.yaml", "validating.yaml"]


def test_ca_bundle_patch_only_touches_stale_webhooks():
    config = render(url="https://127.0.0.1:1", ca_bundle=b"old")[1]
    ops = ca_bundle_patch(config, b"new")
    assert [op["path"] for op in ops] == [
        f"/webhooks/{i}/clientConfig/caBundle" for i in range(len(config["webhooks"]))
    ]
    assert ops[0]["value"] == base64.b64encode(b"new").decode()
    assert ca_bundle_patch(render(url="https://127.0.0.1:1", ca_bundle=b"new")[1], b"new") == []
