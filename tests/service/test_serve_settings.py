"""`lapilli serve` settings are checked once, at start, with every problem listed."""

from pathlib import Path

import pytest

from assembly.serve import Settings, SettingsError, WebhookSettings
from webhook.certs import generate, write_bundle
from webhook.context import AdmissionSettings


def test_settings_problems_are_listed_together(tmp_path: Path):
    paths = write_bundle(generate(["localhost"]), tmp_path)
    good = WebhookSettings(tls_cert_file=paths["tls.crt"], tls_key_file=paths["tls.key"])
    assert Settings(webhook=good).check().webhook.port == 8443
    bad = WebhookSettings(
        port=70000,
        tls_cert_file=paths["tls.crt"],
        tls_key_file=paths["ca.key"],
        tls_reload_interval_s=0,
        ca_bundle_file=tmp_path / "nope.crt",
        admission=AdmissionSettings(scheduler_names=("Bad Name",), max_queue_depth=0),
    )
    with pytest.raises(SettingsError) as caught:
        Settings(kubeconfig=tmp_path / "kc", log_level="LOUD", webhook=bad).check()
    lines = str(caught.value).splitlines()
    assert lines[0] == "--log-level 'LOUD' is not a logging level (DEBUG, INFO, WARNING, ERROR)"
    assert lines[1] == f"--kubeconfig {tmp_path / 'kc'}: no such file"
    assert lines[2] == "--webhook-port 70000 is not a TCP port (0-65535; 0 picks a free one)"
    assert lines[3].startswith("--tls-cert-file/--tls-key-file do not hold a matching PEM certificate and key")
    assert lines[4:] == [
        "--tls-reload-interval 0 must be > 0 seconds",
        f"--ca-bundle-file {tmp_path / 'nope.crt'}: no such file",
        "--scheduler-name 'Bad Name' is not a valid name",
        "--max-queue-depth 0 must be >= 1",
    ]


def test_the_extender_and_the_controllers_need_leases_of_their_own(tmp_path: Path):
    from assembly.serve import ExtenderSettings
    from controller.settings import ControllerSettings

    paths = write_bundle(generate(["localhost"]), tmp_path)
    webhook = WebhookSettings(tls_cert_file=paths["tls.crt"], tls_key_file=paths["tls.key"])
    assert Settings(webhook=webhook).check().controllers.lease_name == "lapilli-controllers"
    same = Settings(webhook=webhook, controllers=ControllerSettings(lease_name="lapilli-extender"))
    with pytest.raises(SettingsError, match="--lease-name and --controllers-lease-name must differ"):
        same.check()
    # Not electing one of them, or electing it elsewhere, is fine.
    Settings(webhook=webhook, controllers=ControllerSettings(lease_name="lapilli-extender", leader_elect=False)).check()
    Settings(webhook=webhook, extender=ExtenderSettings(lease_namespace="other"),
             controllers=ControllerSettings(lease_name="lapilli-extender")).check()
    bad = Settings(webhook=webhook, extender=ExtenderSettings(lease_namespace="Lapilli"),
                   controllers=ControllerSettings(lease_namespace="Lapilli", lease_name="x_y"))
    assert bad.problems() == ["--lease-namespace 'Lapilli' is not a valid namespace name",
                              "--controllers-lease-name 'x_y' is not a valid name"]
