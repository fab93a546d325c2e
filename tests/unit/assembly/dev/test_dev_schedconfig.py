"""kube-scheduler configuration: API version per Kubernetes release, the split extender entries, and the
shipped manifests staying what the generator makes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from assembly.dev.schedconfig import (
    MANIFEST_FILES,
    MANIFEST_VERSIONS,
    config_api_version,
    in_cluster,
    manifest_text,
    render,
)

MANIFESTS = Path(__file__).resolve().parents[4] / "manifests"


@pytest.mark.parametrize(
    ("k8s", "version"),
    [((1, 20), "v1beta1"), ((1, 22), "v1beta1"), ((1, 23), "v1beta3"), ((1, 25), "v1"), ((1, 31), "v1")],
)
def test_api_version_follows_the_server(k8s, version):
    assert config_api_version(k8s) == version


def test_too_old_is_refused():
    with pytest.raises(ValueError):
        config_api_version((1, 18))


def test_dev_config_has_two_profiles_and_split_extenders():
    config = render("v1beta1", kubeconfig="/x/kc", extender_url="http://127.0.0.1:9/extender")
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1beta1"
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler", "volcano"]
    assert config["percentageOfNodesToScore"] == 100
    assert config["clientConnection"] == {"kubeconfig": "/x/kc", "qps": 500, "burst": 1000}
    assert config["leaderElection"] == {"leaderElect": False}
    a, b = config["extenders"]
    assert a == {"urlPrefix": "http://127.0.0.1:9/extender", "filterVerb": "filter", "prioritizeVerb": "prioritize",
                 "preemptVerb": "preempt", "weight": 1, "nodeCacheCapable": True, "httpTimeout": "5s"}
    assert b == {"urlPrefix": "http://127.0.0.1:9/extender/gang", "bindVerb": "bind", "nodeCacheCapable": True,
                 "httpTimeout": "60s"}


def test_tls_extender_entries_carry_kube_schedulers_client_certificate_and_the_extenders_ca():
    tls = {"certFile": "/t/client.crt", "keyFile": "/t/client.key", "caFile": "/t/ca.crt"}
    config = render("v1beta1", kubeconfig="/x/kc", extender_url="https://127.0.0.1:9/extender", extender_tls=tls)
    for entry in config["extenders"]:
        assert entry["urlPrefix"].startswith("https://")
        assert entry["enableHTTPS"] is True
        assert entry["tlsConfig"] == tls  # with a caFile, kube-scheduler verifies the extender too


def test_insecure_listener_moves_to_loopback_on_v1beta1_only():
    old = render("v1beta1", kubeconfig="/x/kc", insecure_port=4321)
    assert old["healthzBindAddress"] == old["metricsBindAddress"] == "127.0.0.1:4321"
    assert "healthzBindAddress" not in render("v1", kubeconfig="/x/kc", insecure_port=4321)


def test_without_service_no_extenders():
    assert "extenders" not in render("v1", kubeconfig="/x/kc")


@pytest.mark.parametrize("version", MANIFEST_VERSIONS)
def test_shipped_manifest_is_generated(version):
    path = MANIFESTS / MANIFEST_FILES[version]
    assert path.read_text() == manifest_text(version), "regenerate: python -m assembly.dev.schedconfig"
    config = yaml.safe_load(path.read_text())
    assert config == in_cluster(version)
    assert [p["schedulerName"] for p in config["profiles"]] == ["volcano"]
    assert config["leaderElection"]["leaderElect"] is True
    assert config["extenders"][1]["urlPrefix"] == "http://127.0.0.1:8080/extender/gang"  # the extender beside it
