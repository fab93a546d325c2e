"""`lapilli serve` settings are checked once, at start, with every problem listed."""

import re
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


def test_serve_flags_are_the_settings_fields(tmp_path: Path):
    """`lapilli serve` offers one option per flag field (shared ones once) and builds `Settings` from them."""
    from click.testing import CliRunner

    from assembly.cli.serve import serve
    from lapilli.settings import flag_fields, from_flags

    fields = flag_fields(Settings)
    names = {f.flag.name for f in fields}
    assert len(names) < len(fields)  # --scheduler-name, --leader-elect, --lease-namespace feed two groups
    usage = CliRunner().invoke(serve, ["--help"], terminal_width=200).output
    assert names <= set(re.findall(r"--[a-z-]+", usage.split("Options:")[1]))
    assert all(f.doc for f in fields)  # every flag has its help

    argv = ["--scheduler-name", "a", "--scheduler-name", "b", "--no-leader-elect", "--webhook-port", "9443",
            "--kubeconfig", str(tmp_path / "kc"), "--enable-queue-allocated-pods-check", "--session-thread",
            "--controllers-lease-name", "c"]
    settings = from_flags(Settings, serve.make_context("serve", argv).params)
    assert settings.webhook.admission.scheduler_names == ("a", "b") == settings.controllers.scheduler_names
    assert settings.extender.scheduler_names == ("a", "b")
    assert not settings.extender.leader_elect and not settings.controllers.leader_elect
    assert settings.webhook.port == 9443 and settings.kubeconfig == tmp_path / "kc"
    assert settings.webhook.admission.queue_allocated_pods_check and not settings.extender.session_process
    assert settings.controllers.lease_name == "c" and settings.extender.lease_name == "lapilli-extender"
    # Every field left alone keeps the dataclass default: the flags' defaults are the fields'.
    assert from_flags(Settings, serve.make_context("serve", []).params) == Settings()
