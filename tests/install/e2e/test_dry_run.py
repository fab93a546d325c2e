"""The install for the e2e tier's Kubernetes (manifests/overlays/k8s-1.20) through a server-side dry-run apply on
the real control plane: every object is accepted by the API server's validation and admission."""

from __future__ import annotations

import time

import yaml

from tests.install.manifests import render_text

TREE = "overlays/k8s-1.20"


def _renamed_webhook_configurations(text: str) -> str:
    """The control plane's own webhook configurations carry these names with `url:` client configs (there is no
    Service networking there); a server-side apply would merge `service:` into them and hold both. The dry run
    checks the install's objects as a fresh cluster gets them, so those two are applied under other names."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    for d in docs:
        if d["kind"].endswith("WebhookConfiguration"):
            d["metadata"]["name"] += "-dry-run"
    return yaml.safe_dump_all(docs, sort_keys=False)


def test_server_side_dry_run_accepts_every_object(control_plane):
    text = _renamed_webhook_configurations(render_text(TREE))
    began = time.monotonic()
    # --force-conflicts: the control plane's bootstrap already made some of these objects (CRDs, RBAC) with
    # another field manager; nothing is written in a dry run.
    done = control_plane.kubectl("apply", "--server-side", "--dry-run=server", "--force-conflicts",
                                 "--field-manager=lapilli-install", "-o", "yaml", "-f", "-", input=text, check=False)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    accepted = yaml.safe_load(done.stdout)
    items = accepted["items"] if accepted.get("kind") == "List" else [accepted]
    wanted = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(text) if d}
    assert {(i["kind"], i["metadata"]["name"]) for i in items} == wanted
    print(f"server-side dry-run of {len(wanted)} objects: {took:.2f}s")
