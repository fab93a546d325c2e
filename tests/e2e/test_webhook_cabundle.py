"""`lapilli serve --ca-bundle-file`: the caBundle of webhook configurations is patched through the real API."""

from __future__ import annotations

import base64
import contextlib

from assembly.dev import DevCluster
from assembly.serve.cabundle import CaBundleSync
from lapilli.kube import NotFound
from lapilli.kube.resources import MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from webhook.certs import generate_ca
from webhook.configs import render

NAMES = ("e2e-cabundle-mutating", "e2e-cabundle-validating")


def inert(configuration: dict) -> dict:
    """Point every rule at an API group nothing uses, so these configurations never affect other tests."""
    for hook in configuration["webhooks"]:
        for rule in hook["rules"]:
            rule["apiGroups"] = ["e2e.lapilli.invalid"]
    return configuration


async def test_ca_bundle_is_patched_and_kept(control_plane: DevCluster, tmp_path):
    client = control_plane.client
    assert client is not None
    old_ca, _ = generate_ca("old")
    new_ca, _ = generate_ca("new")
    mutating, validating = (inert(c) for c in render(url="https://127.0.0.1:1", ca_bundle=old_ca, names=NAMES))
    for res, obj in ((MUTATING_WEBHOOKS, mutating), (VALIDATING_WEBHOOKS, validating)):
        with contextlib.suppress(NotFound):
            await client.delete(res, obj["metadata"]["name"])
        await client.create(res, obj)
    try:
        ca_file = tmp_path / "ca.crt"
        ca_file.write_bytes(new_ca)
        sync = CaBundleSync(client, ca_file, NAMES)
        assert await sync.sync_once() is True
        expected = base64.b64encode(new_ca).decode()
        for res, name in ((MUTATING_WEBHOOKS, NAMES[0]), (VALIDATING_WEBHOOKS, NAMES[1])):
            stored = await client.get(res, name)
            assert [h["clientConfig"]["caBundle"] for h in stored["webhooks"]] == [expected] * len(stored["webhooks"])
        assert await CaBundleSync(client, ca_file, (*NAMES, "e2e-cabundle-missing")).sync_once() is False
    finally:
        await client.delete(MUTATING_WEBHOOKS, NAMES[0])
        await client.delete(VALIDATING_WEBHOOKS, NAMES[1])
